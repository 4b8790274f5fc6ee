//===- checkpoint.cpp - save and load sessions as safetensors ---*- C++ -*-===//
//
// This file implements mpc_save_checkpoint and mpc_load_checkpoint. A
// checkpoint is a standard safetensors file, so PyTorch reads the weights
// with safetensors.torch.load_file:
//
//   <param or state name>           the tensor, in its dtype
//   optimizer.<slot>.<param>        optimizer state of a parameter, in its
//                                   dtype (slot: exp_avg, momentum_buffer..)
//   __metadata__  format: "mpc", model: <name>, optimizer: <name>,
//                 step: <decimal>, seed: <decimal>, and the loss scaler:
//                 loss_scale (9 significant digits, exact for a float),
//                 loss_scale_growth_tracker, loss_scale_hysteresis_left,
//                 optimizer_steps, skipped_steps
//
// The seed is restored on load because dropout masks are drawn from
// (seed, step): a resumed run then draws the same masks as an uninterrupted
// one. Hyper-parameters are not restored; the session's own apply.
//
// Loading reads and checks the whole file before it writes to the session,
// so a failed load leaves the session exactly as it was.
//
//===----------------------------------------------------------------------===//

#include "runtime/mpc_runtime.h"

#include "runtime/cuda/cuda_session.h"
#include "runtime/error.h"
#include "runtime/half.h"
#include "runtime/safetensors.h"
#include "runtime/session.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <zlib.h>

using mpcrt::set_error;

namespace {

// The __metadata__ "format" value that marks an mpc checkpoint.
const char *const FORMAT_NAME = "mpc";

std::string slot_name(const mpc_model_desc *model, int32_t slot,
                      const mpc_tensor_desc &param) {
  return std::string("optimizer.") + model->optimizer_slot_names[slot] + "." +
         param.name;
}

std::vector<int64_t> shape_of(const mpc_tensor_desc &tensor) {
  return std::vector<int64_t>(tensor.shape, tensor.shape + tensor.rank);
}

std::string shape_text(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// One tensor the checkpoint holds: where its bytes live in the session.
struct checkpoint_entry {
  std::string name;
  const mpc_tensor_desc *tensor; // its shape (and offset)
  mpc_dtype dtype;               // the tensor's, or its optimizer slot's
  unsigned char *data;
};

std::vector<checkpoint_entry> checkpoint_entries(mpc_session *session) {
  const mpc_model_desc *model = session->model;
  std::vector<checkpoint_entry> entries;
  for (int32_t i = 0; i < model->num_params; ++i)
    entries.push_back({model->params[i].name, &model->params[i],
                       model->params[i].dtype,
                       mpcrt::tensor_data(session, model->params[i])});
  for (int32_t i = 0; i < model->num_states; ++i)
    entries.push_back({model->states[i].name, &model->states[i],
                       model->states[i].dtype,
                       mpcrt::tensor_data(session, model->states[i])});
  for (int32_t slot = 0; slot < model->optimizer_slots; ++slot)
    for (int32_t i = 0; i < model->num_params; ++i)
      entries.push_back(
          {slot_name(model, slot, model->params[i]), &model->params[i],
           mpcrt::slot_dtype(model, model->params[i], slot),
           mpcrt::optimizer_slot_data(session, model->params[i], slot)});
  return entries;
}

/// A sharded session's whole state, staged (mpcrt::stage_whole_state)
/// while in scope: unstaged without writing back on every early return.
class staged_state {
public:
  explicit staged_state(mpc_session *session) : session(session) {}
  staged_state(const staged_state &) = delete;
  staged_state &operator=(const staged_state &) = delete;
  ~staged_state() { mpcrt::unstage_whole_state(session, false); }
  /// The rank's shards (and f32 copies) from the staged tensors.
  void write_back() { mpcrt::unstage_whole_state(session, true); }

private:
  mpc_session *session;
};

/// Whether `entries` holds one called `name`.
bool has_entry(const std::vector<checkpoint_entry> &entries,
               const std::string &name) {
  for (const checkpoint_entry &entry : entries)
    if (entry.name == name)
      return true;
  return false;
}

// A non-negative decimal integer that fits in uint64_t, and nothing else.
bool parse_decimal(const std::string &text, uint64_t *value) {
  if (text.empty() || text.size() > 20)
    return false;
  for (char c : text)
    if (c < '0' || c > '9')
      return false;
  errno = 0;
  char *end = nullptr;
  unsigned long long parsed = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0')
    return false;
  *value = parsed;
  return true;
}

const std::string *find_metadata(const mpcrt::safetensors_file &file,
                                 const char *key) {
  auto it = file.metadata.find(key);
  return it == file.metadata.end() ? nullptr : &it->second;
}

/// The loss scaler's state from a checkpoint's metadata: every field
/// present, in range, and consistent (skipped <= total).
mpc_status read_scaler(const mpcrt::safetensors_file &file, const char *path,
                       mpc_loss_scaler_state *scaler) {
  const std::string *scale = find_metadata(file, "loss_scale");
  char *end = nullptr;
  double value = scale ? std::strtod(scale->c_str(), &end) : 0;
  if (!scale || scale->empty() || *end != '\0' || !std::isfinite(value) ||
      !(value > 0) || value > 3.4028234663852886e38)
    return set_error(MPC_ERROR_FORMAT,
                     "'%s': __metadata__ loss_scale is missing or not a "
                     "positive finite float",
                     path);
  uint64_t numbers[4];
  const char *const keys[4] = {"loss_scale_growth_tracker",
                               "loss_scale_hysteresis_left", "optimizer_steps",
                               "skipped_steps"};
  for (int k = 0; k < 4; ++k) {
    const std::string *text = find_metadata(file, keys[k]);
    uint64_t limit = k < 2 ? static_cast<uint64_t>(INT32_MAX)
                           : static_cast<uint64_t>(INT64_MAX);
    if (!text || !parse_decimal(*text, &numbers[k]) || numbers[k] > limit)
      return set_error(MPC_ERROR_FORMAT,
                       "'%s': __metadata__ %s is missing or not a "
                       "non-negative integer in range",
                       path, keys[k]);
  }
  if (numbers[3] > numbers[2])
    return set_error(MPC_ERROR_FORMAT,
                     "'%s': __metadata__ skipped_steps %llu exceeds "
                     "optimizer_steps %llu",
                     path, static_cast<unsigned long long>(numbers[3]),
                     static_cast<unsigned long long>(numbers[2]));
  scaler->scale = static_cast<float>(value);
  scaler->growth_tracker = static_cast<int>(numbers[0]);
  scaler->hysteresis_left = static_cast<int>(numbers[1]);
  scaler->total_steps = static_cast<long long>(numbers[2]);
  scaler->total_skipped = static_cast<long long>(numbers[3]);
  return MPC_OK;
}

/// The __metadata__ key of a tensor's checksum.
std::string checksum_key(const std::string &tensor) {
  return "crc32:" + tensor;
}

uint32_t checksum(const void *data, uint64_t bytes) {
  return static_cast<uint32_t>(crc32_z(crc32_z(0, Z_NULL, 0),
                                       static_cast<const Bytef *>(data),
                                       static_cast<z_size_t>(bytes)));
}

/// The first element of a float tensor's payload that is inf or NaN, or -1.
int64_t first_nonfinite(const std::string &dtype, const unsigned char *data,
                        uint64_t bytes) {
  // An exponent of all ones: inf or NaN, in every float format.
  if (dtype == "F32") {
    for (uint64_t i = 0; i < bytes / 4; ++i) {
      uint32_t bits;
      std::memcpy(&bits, data + 4 * i, 4);
      if ((bits & 0x7f800000u) == 0x7f800000u)
        return static_cast<int64_t>(i);
    }
  } else if (dtype == "F16" || dtype == "BF16") {
    uint16_t exponent = dtype == "F16" ? 0x7c00u : 0x7f80u;
    for (uint64_t i = 0; i < bytes / 2; ++i) {
      uint16_t bits;
      std::memcpy(&bits, data + 2 * i, 2);
      if ((bits & exponent) == exponent)
        return static_cast<int64_t>(i);
    }
  }
  return -1;
}

} // namespace

// ----------------------------------------------------------------------------
// C API

extern "C" mpc_status mpc_save_checkpoint(mpc_session *session,
                                          const char *path) {
  if (!session)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_save_checkpoint: session is null");
  if (!path || !*path)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_save_checkpoint: path is %s",
                     path ? "empty" : "null");
  const mpc_model_desc *model = session->model;
  // A cuda session's tensors are read from its host mirror.
  if (mpc_status status = mpcrt::sync_host(session))
    return status;
  // A sharded optimizer state is written whole, as an unsharded one.
  staged_state staged(session);
  if (mpc_status status = mpcrt::stage_whole_state(session, /*gather=*/true))
    return status;
  std::vector<checkpoint_entry> entries = checkpoint_entries(session);
  std::vector<mpcrt::safetensors_tensor> tensors;
  for (const checkpoint_entry &entry : entries)
    tensors.push_back(
        {entry.name, entry.dtype, shape_of(*entry.tensor), entry.data});
  // Widest dtype first (stable, so the order is otherwise the model's): every
  // tensor's data then starts at a multiple of its element size, as the
  // safetensors library lays files out for zero-copy loading.
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const mpcrt::safetensors_tensor &l,
                      const mpcrt::safetensors_tensor &r) {
                     return mpc_dtype_size(l.dtype) > mpc_dtype_size(r.dtype);
                   });
  std::vector<std::pair<std::string, std::string>> metadata = {
      {"format", FORMAT_NAME},
      {"model", model->name},
      {"optimizer", model->optimizer_name},
      {"step", std::to_string(session->step)},
      {"seed", std::to_string(session->seed)},
      {"accumulate", std::to_string(model->accumulate_steps)}};
  const mpc_loss_scaler_state &scaler = mpcrt::train_control(session)->scaler;
  char scale[32];
  std::snprintf(scale, sizeof(scale), "%.9g",
                static_cast<double>(scaler.scale));
  metadata.push_back({"loss_scale", scale});
  metadata.push_back(
      {"loss_scale_growth_tracker", std::to_string(scaler.growth_tracker)});
  metadata.push_back(
      {"loss_scale_hysteresis_left", std::to_string(scaler.hysteresis_left)});
  metadata.push_back({"optimizer_steps", std::to_string(scaler.total_steps)});
  metadata.push_back({"skipped_steps", std::to_string(scaler.total_skipped)});
  for (const mpcrt::safetensors_tensor &tensor : tensors) {
    uint64_t bytes = mpc_dtype_size(tensor.dtype);
    for (int64_t dim : tensor.shape)
      bytes *= static_cast<uint64_t>(dim);
    char text[16];
    std::snprintf(text, sizeof(text), "%08x", checksum(tensor.data, bytes));
    metadata.push_back({checksum_key(tensor.name), text});
  }
  return mpcrt::write_safetensors(path, tensors, metadata);
}

extern "C" mpc_status mpc_load_checkpoint(mpc_session *session,
                                          const char *path) {
  if (!session)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_load_checkpoint: session is null");
  if (!path || !*path)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_load_checkpoint: path is %s",
                     path ? "empty" : "null");
  const mpc_model_desc *model = session->model;
  mpcrt::safetensors_file file;
  if (mpc_status status = mpcrt::read_safetensors(path, &file))
    return status;

  // Metadata: is this an mpc checkpoint, of this model?
  const std::string *format = find_metadata(file, "format");
  if (!format || *format != FORMAT_NAME)
    return set_error(MPC_ERROR_FORMAT,
                     "'%s' is a safetensors file but not an mpc checkpoint "
                     "(no __metadata__ format \"mpc\")",
                     path);
  const std::string *model_name = find_metadata(file, "model");
  if (!model_name || *model_name != model->name)
    return set_error(
        MPC_ERROR_FORMAT, "'%s' is a checkpoint of model '%s', not of '%s'",
        path, model_name ? model_name->c_str() : "(unnamed)", model->name);
  const std::string *optimizer = find_metadata(file, "optimizer");
  if (!optimizer || *optimizer != model->optimizer_name)
    return set_error(MPC_ERROR_FORMAT,
                     "'%s' holds optimizer state of '%s', model '%s' uses "
                     "'%s'",
                     path, optimizer ? optimizer->c_str() : "(none)",
                     model->name, model->optimizer_name);
  const std::string *step_text = find_metadata(file, "step");
  const std::string *seed_text = find_metadata(file, "seed");
  uint64_t step = 0, seed = 0;
  if (!step_text || !parse_decimal(*step_text, &step) ||
      step > static_cast<uint64_t>(INT64_MAX))
    return set_error(MPC_ERROR_FORMAT,
                     "'%s': __metadata__ step is missing or not a "
                     "non-negative integer",
                     path);
  if (!seed_text || !parse_decimal(*seed_text, &seed))
    return set_error(MPC_ERROR_FORMAT,
                     "'%s': __metadata__ seed is missing or not a "
                     "non-negative integer",
                     path);
  mpc_loss_scaler_state scaler = {};
  if (mpc_status status = read_scaler(file, path, &scaler))
    return status;
  // The gradient accumulator (--accumulate) holds nothing the next step
  // reads when a checkpoint falls between optimizer steps: there it may be
  // absent (a checkpoint of a build without it, such as a data-parallel
  // one) or left out (loading into such a build). So a checkpoint moves
  // between world sizes and accumulation counts.
  const std::string *accumulate_text = find_metadata(file, "accumulate");
  uint64_t file_accumulate = 0;
  if (accumulate_text && !parse_decimal(*accumulate_text, &file_accumulate))
    return set_error(MPC_ERROR_FORMAT,
                     "'%s': __metadata__ accumulate is not a non-negative "
                     "integer",
                     path);
  auto isAccumulator = [](const std::string &name) {
    return name.rfind("optimizer.grad_accumulator.", 0) == 0;
  };
  bool fileBetweenSteps = file_accumulate > 0 && step % file_accumulate == 0;
  // The step counter counts micro-batches: between optimizer steps it moves
  // to this build's count of micro-batches per step.
  uint64_t accumulate = static_cast<uint64_t>(model->accumulate_steps);
  if (fileBetweenSteps && file_accumulate != accumulate) {
    uint64_t optimizerSteps = step / file_accumulate;
    if (optimizerSteps > static_cast<uint64_t>(INT64_MAX) / accumulate)
      return set_error(MPC_ERROR_FORMAT, "'%s': __metadata__ step is too large",
                       path);
    step = optimizerSteps * accumulate;
  } else if (file_accumulate > 0 && file_accumulate != accumulate) {
    return set_error(MPC_ERROR_FORMAT,
                     "'%s' was saved in the middle of an optimizer step of "
                     "%llu micro-batches; only a build with --accumulate=%llu "
                     "can continue it (this one has %llu)",
                     path, static_cast<unsigned long long>(file_accumulate),
                     static_cast<unsigned long long>(file_accumulate),
                     static_cast<unsigned long long>(accumulate));
  }
  bool modelBetweenSteps = step % accumulate == 0;

  // Tensors: every one the session has, with its dtype and shape, and no
  // others (a sharded session's, whole: each rank takes its shards).
  staged_state staged(session);
  if (mpc_status status = mpcrt::stage_whole_state(session, /*gather=*/false))
    return status;
  std::vector<checkpoint_entry> entries = checkpoint_entries(session);
  std::vector<checkpoint_entry> zeroed;
  for (auto entry = entries.begin(); entry != entries.end();) {
    if (!file.tensors.count(entry->name) && isAccumulator(entry->name) &&
        modelBetweenSteps) {
      zeroed.push_back(*entry);
      entry = entries.erase(entry);
    } else {
      ++entry;
    }
  }
  for (const checkpoint_entry &entry : entries) {
    auto found = file.tensors.find(entry.name);
    if (found == file.tensors.end())
      return set_error(MPC_ERROR_FORMAT, "'%s' has no tensor '%s'", path,
                       entry.name.c_str());
    const mpcrt::safetensors_entry &stored = found->second;
    const char *dtype = mpcrt::safetensors_dtype(entry.dtype);
    if (stored.dtype != dtype)
      return set_error(MPC_ERROR_FORMAT,
                       "'%s': tensor '%s' has dtype %s, model '%s' expects %s",
                       path, entry.name.c_str(), stored.dtype.c_str(),
                       model->name, dtype);
    std::vector<int64_t> expected = shape_of(*entry.tensor);
    if (stored.shape != expected)
      return set_error(MPC_ERROR_FORMAT,
                       "'%s': tensor '%s' has shape %s, model '%s' expects %s",
                       path, entry.name.c_str(),
                       shape_text(stored.shape).c_str(), model->name,
                       shape_text(expected).c_str());
  }
  if (file.tensors.size() != entries.size()) {
    for (const auto &stored : file.tensors) {
      bool known = has_entry(entries, stored.first) ||
                   (isAccumulator(stored.first) && fileBetweenSteps);
      if (!known)
        return set_error(MPC_ERROR_FORMAT,
                         "'%s' has tensor '%s', which model '%s' does not have",
                         path, stored.first.c_str(), model->name);
    }
  }

  // Payloads: each tensor's checksum, where the file has them (a damaged
  // file is refused whole, naming the tensor), and no inf or NaN (which no
  // training state holds, and which would poison every later step).
  bool checksummed = false;
  for (const auto &[key, value] : file.metadata)
    checksummed = checksummed || key.rfind("crc32:", 0) == 0;
  for (const checkpoint_entry &entry : entries) {
    const mpcrt::safetensors_entry &stored =
        file.tensors.find(entry.name)->second;
    const unsigned char *data =
        static_cast<const unsigned char *>(file.data(stored));
    uint64_t bytes = stored.end - stored.begin;
    if (checksummed) {
      const std::string *text =
          find_metadata(file, checksum_key(entry.name).c_str());
      uint64_t recorded = 0;
      char *end = nullptr;
      if (text && text->size() == 8)
        recorded = std::strtoull(text->c_str(), &end, 16);
      if (!text || text->size() != 8 || *end != '\0')
        return set_error(MPC_ERROR_FORMAT,
                         "'%s': tensor '%s' has no checksum (__metadata__ "
                         "%s of 8 hex digits), though the others do",
                         path, entry.name.c_str(),
                         checksum_key(entry.name).c_str());
      uint32_t actual = checksum(data, bytes);
      if (actual != recorded)
        return set_error(MPC_ERROR_FORMAT,
                         "'%s': tensor '%s' is damaged: its CRC-32 is %08x, "
                         "the checkpoint recorded %08llx",
                         path, entry.name.c_str(), actual,
                         static_cast<unsigned long long>(recorded));
    }
    int64_t bad = first_nonfinite(stored.dtype, data, bytes);
    if (bad >= 0)
      return set_error(MPC_ERROR_FORMAT,
                       "'%s': tensor '%s' holds inf or NaN (element %lld): "
                       "the file is damaged or the training it saved had "
                       "diverged",
                       path, entry.name.c_str(), static_cast<long long>(bad));
  }

  // Everything checked: nothing below can fail, except (cuda sessions)
  // the copies between the host mirror and the device.
  if (mpc_status status = mpcrt::sync_host(session))
    return status;
  for (const checkpoint_entry &entry : entries) {
    const mpcrt::safetensors_entry &stored =
        file.tensors.find(entry.name)->second;
    std::memcpy(entry.data, file.data(stored),
                static_cast<size_t>(stored.end - stored.begin));
  }
  for (const checkpoint_entry &entry : zeroed)
    std::memset(entry.data, 0,
                static_cast<size_t>(entry.tensor->num_elements *
                                    mpc_dtype_size(entry.dtype)));
  session->step = static_cast<int64_t>(step);
  session->seed = seed;
  mpc_train_control *control = mpcrt::train_control(session);
  control->scaler = scaler;
  control->step_scale = scaler.scale;
  staged.write_back();
  if (mpc_status status = mpcrt::sync_device(session))
    return status;
  session->checkpoint_verified = checksummed ? 1 : 0;
  // The half copies the forward pass reads follow the loaded weights.
  return mpcrt::sync_half_copies(session);
}

namespace {

/// The mpc dtype a safetensors float dtype string names; -1 if none.
int32_t float_dtype_of(const std::string &dtype) {
  if (dtype == "F32")
    return MPC_F32;
  if (dtype == "F16")
    return MPC_F16;
  if (dtype == "BF16")
    return MPC_BF16;
  return -1;
}

/// The largest finite value of a half dtype; infinity for f32.
float largest_finite(mpc_dtype dtype) {
  switch (dtype) {
  case MPC_F16:
    return 65504.0f;
  case MPC_BF16:
    return 3.3895313892515355e38f;
  default:
    return INFINITY;
  }
}

} // namespace

extern "C" mpc_status mpc_load_weights(mpc_session *session, const char *path,
                                       int32_t strict,
                                       mpc_weights_report *report) {
  if (!session)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_load_weights: session is null");
  if (!path || !*path)
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "mpc_load_weights: path is %s",
                     path ? "empty" : "null");
  const mpc_model_desc *model = session->model;
  mpcrt::safetensors_file file;
  if (mpc_status status = mpcrt::read_safetensors(path, &file))
    return status;

  // Parameters and state only: an mpc checkpoint's optimizer state is not
  // weights (sharded master weights: staged whole, this rank's filled in,
  // which is all it takes back).
  staged_state staged(session);
  if (mpc_status status = mpcrt::stage_whole_state(
          session, /*gather=*/false, /*with_slots=*/false))
    return status;
  std::vector<checkpoint_entry> entries = checkpoint_entries(session);
  entries.resize(static_cast<size_t>(model->num_params + model->num_states));
  auto isOptimizerState = [](const std::string &name) {
    return name.rfind("optimizer.", 0) == 0;
  };
  std::string missing, unexpected;
  int32_t missingCount = 0, unexpectedCount = 0, converted = 0;
  std::vector<
      std::pair<const checkpoint_entry *, const mpcrt::safetensors_entry *>>
      found;
  for (const checkpoint_entry &entry : entries) {
    auto stored = file.tensors.find(entry.name);
    if (stored == file.tensors.end()) {
      if (strict)
        return set_error(MPC_ERROR_FORMAT,
                         "'%s' has no tensor '%s' (mpc_load_weights with "
                         "strict = 0 keeps what the file lacks)",
                         path, entry.name.c_str());
      missing += entry.name + "\n";
      ++missingCount;
      continue;
    }
    found.push_back({&entry, &stored->second});
  }
  for (const auto &[name, stored] : file.tensors) {
    bool known = std::any_of(
        entries.begin(), entries.end(),
        [&](const checkpoint_entry &entry) { return entry.name == name; });
    if (known || isOptimizerState(name))
      continue;
    if (strict)
      return set_error(MPC_ERROR_FORMAT,
                       "'%s' has tensor '%s', which model '%s' does not have "
                       "(mpc_load_weights with strict = 0 skips it)",
                       path, name.c_str(), model->name);
    unexpected += name + "\n";
    ++unexpectedCount;
  }

  // Every tensor that loads: its shape, a dtype that converts, and finite
  // values that fit the model's dtype.
  for (const auto &[entry, stored] : found) {
    std::vector<int64_t> expected = shape_of(*entry->tensor);
    if (stored->shape != expected)
      return set_error(MPC_ERROR_FORMAT,
                       "'%s': tensor '%s' has shape %s, model '%s' expects %s",
                       path, entry->name.c_str(),
                       shape_text(stored->shape).c_str(), model->name,
                       shape_text(expected).c_str());
    const char *dtype = mpcrt::safetensors_dtype(entry->dtype);
    int32_t from = float_dtype_of(stored->dtype);
    bool isFloat = float_dtype_of(dtype) >= 0;
    if (stored->dtype != dtype && !(isFloat && from >= 0))
      return set_error(MPC_ERROR_FORMAT,
                       "'%s': tensor '%s' has dtype %s, model '%s' expects %s",
                       path, entry->name.c_str(), stored->dtype.c_str(),
                       model->name, dtype);
    const unsigned char *data = file.data(*stored);
    int64_t bad =
        first_nonfinite(stored->dtype, data, stored->end - stored->begin);
    if (bad >= 0)
      return set_error(MPC_ERROR_FORMAT,
                       "'%s': tensor '%s' holds inf or NaN (element %lld)",
                       path, entry->name.c_str(), static_cast<long long>(bad));
    // Every f16 and bf16 value fits in f32; the other way, values that
    // round to the largest finite value still fit.
    mpc_dtype to = entry->dtype;
    if (!isFloat || stored->dtype == dtype || to == MPC_F32)
      continue;
    float limit = largest_finite(to);
    for (int64_t i = 0; i < entry->tensor->num_elements; ++i) {
      float value = mpc_load_as_f32(static_cast<mpc_dtype>(from), data, i);
      uint16_t rounded = 0;
      mpc_store_from_f32(to, &rounded, 0, value);
      if (!std::isfinite(mpc_load_as_f32(to, &rounded, 0)))
        return set_error(MPC_ERROR_FORMAT,
                         "'%s': tensor '%s' element %lld is %g, beyond %s's "
                         "range (largest %g)",
                         path, entry->name.c_str(), static_cast<long long>(i),
                         static_cast<double>(value), dtype,
                         static_cast<double>(limit));
    }
  }

  // Everything checked: copy or convert into the host mirror.
  if (mpc_status status = mpcrt::sync_host(session))
    return status;
  for (const auto &[entry, stored] : found) {
    const unsigned char *data = file.data(*stored);
    const char *dtype = mpcrt::safetensors_dtype(entry->dtype);
    if (stored->dtype == dtype) {
      std::memcpy(entry->data, data,
                  static_cast<size_t>(stored->end - stored->begin));
      continue;
    }
    mpc_dtype from = static_cast<mpc_dtype>(float_dtype_of(stored->dtype));
    for (int64_t i = 0; i < entry->tensor->num_elements; ++i)
      mpc_store_from_f32(entry->dtype, entry->data, i,
                         mpc_load_as_f32(from, data, i));
    ++converted;
  }
  staged.write_back();
  if (mpc_status status = mpcrt::sync_device(session))
    return status;
  // The names (left empty where no memory is left for them).
  std::free(session->weights_missing);
  std::free(session->weights_unexpected);
  session->weights_missing = strdup(missing.c_str());
  session->weights_unexpected = strdup(unexpected.c_str());
  if (report) {
    report->loaded = static_cast<int32_t>(found.size());
    report->converted = converted;
    report->missing = missingCount;
    report->unexpected = unexpectedCount;
    report->missing_names =
        session->weights_missing ? session->weights_missing : "";
    report->unexpected_names =
        session->weights_unexpected ? session->weights_unexpected : "";
  }
  // The half copies the forward pass reads follow the loaded weights.
  return mpcrt::sync_half_copies(session);
}

extern "C" int32_t mpc_checkpoint_was_verified(const mpc_session *session) {
  return session ? session->checkpoint_verified : 0;
}
