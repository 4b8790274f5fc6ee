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
  auto siteAt = [&](int32_t index) -> const mpc_debug_site * {
    if (index < 0 || index >= model->num_debug_sites) {
      set_error(MPC_ERROR_INTERNAL,
                "model '%s': a --debug-nonfinite check named site %d of %d",
                model->name, index, model->num_debug_sites);
      return nullptr;
    }
    return &model->debug_sites[index];
  };
  if (record.fp8_found) {
    const mpc_debug_site *gemm = siteAt(record.fp8_gemm_site);
    const mpc_debug_site *quantize = siteAt(record.fp8_quantize_site);
    if (!gemm || !quantize)
      return MPC_ERROR_INTERNAL;
    report->fp8_saturated = 1;
    report->fp8_gemm_op = gemm->op;
    report->fp8_gemm_location = gemm->location;
    report->fp8_backward = gemm->backward;
    report->fp8_operand = record.fp8_operand ? "rhs" : "lhs";
    report->fp8_format = record.fp8_format ? "e5m2" : "e4m3";
    report->fp8_tensor_location = quantize->location;
    report->fp8_num_elements = record.fp8_num_elements;
    report->fp8_saturated_count = record.fp8_saturated;
    report->fp8_amax = record.fp8_amax;
    report->fp8_scale = record.fp8_scale;
  }
  if (!record.found && !record.fp8_found)
    return MPC_OK;
  report->training = session->nonfinite_training;
  report->step = session->nonfinite_step;
  report->loss_scale = session->nonfinite_loss_scale;
  if (!record.found)
    return MPC_OK;
  const mpc_debug_site *found = siteAt(record.site);
  if (!found)
    return MPC_ERROR_INTERNAL;
  const mpc_debug_site &site = *found;
  report->found = 1;
  report->op = site.op;
  report->location = site.location;
  report->backward = site.backward;
  report->num_elements = record.num_elements;
  report->nan_count = record.nan_count;
  report->inf_count = record.inf_count;
  report->max_abs_finite = record.max_abs_finite;
  report->outside_half_range = record.outside_half_range;
  return MPC_OK;
}
