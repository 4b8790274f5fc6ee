//===- nonfinite.cpp - the report of `mpc compile --debug-nonfinite` -*- C++
//-*-===//
//
// The check kernels of a --debug-nonfinite build record the first op output
// of a step that held inf/NaN in the session (run_step clears the record
// and passes it in the step context); this file turns the record into the
// report applications read, naming the op from the model's site table.
//
//===----------------------------------------------------------------------===//

#include "runtime/error.h"
#include "runtime/mpc_model.h"
#include "runtime/mpc_runtime.h"
#include "runtime/session.h"

#include <cmath>

using mpcrt::set_error;

extern "C" mpc_status mpc_get_nonfinite_report(const mpc_session *session,
                                               mpc_nonfinite_report *report) {
  if (!session || !report)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_get_nonfinite_report: %s is null",
                     session ? "report" : "session");
  const mpc_model_desc *model = session->model;
  if (!model->debug_nonfinite)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_get_nonfinite_report: model '%s' was compiled "
                     "without --debug-nonfinite",
                     model->name);
  const mpc_nonfinite_record &record = session->nonfinite;
  *report = mpc_nonfinite_report{};
  report->loss_scale = NAN;
  if (!record.found)
    return MPC_OK;
  if (record.site < 0 || record.site >= model->num_debug_sites)
    return set_error(MPC_ERROR_INTERNAL,
                     "model '%s': a non-finite check named site %d of %d",
                     model->name, record.site, model->num_debug_sites);
  const mpc_debug_site &site = model->debug_sites[record.site];
  report->found = 1;
  report->op = site.op;
  report->location = site.location;
  report->backward = site.backward;
  report->training = session->nonfinite_training;
  report->step = session->nonfinite_step;
  report->loss_scale = session->nonfinite_loss_scale;
  report->num_elements = record.num_elements;
  report->nan_count = record.nan_count;
  report->inf_count = record.inf_count;
  report->max_abs_finite = record.max_abs_finite;
  report->outside_half_range = record.outside_half_range;
  return MPC_OK;
}
