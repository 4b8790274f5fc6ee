//===- test_model.cpp - hand-written models for runtime tests ---*- C++ -*-===//
//
// This file implements test_model.h: the "linear" model written the way
// generated cpu code will be (constant descriptor, fixed offsets, GEMMs
// through mpc_rt_gemm), and the descriptor builder.
//
//===----------------------------------------------------------------------===//

#include "tests/unit/test_model.h"

#include "runtime/gemm.h"
#include "runtime/half.h"

#include <cmath>
#include <cstring>

namespace mpc_test {

namespace {

// ----------------------------------------------------------------------------
// Memory plan of "linear" (byte offsets)

constexpr int B = LINEAR_BATCH, D = LINEAR_FEATURES, C = LINEAR_CLASSES;

// params arena (the grads and the one optimizer slot mirror it)
constexpr int64_t W_OFFSET = 0;                    // [C, D] f32
constexpr int64_t B_OFFSET = W_OFFSET + C * D * 4; // [C] f32
constexpr int64_t SEEN_OFFSET = B_OFFSET + C * 4;  // [1] f32 (state)
constexpr int64_t PARAMS_BYTES = 128;
static_assert(SEEN_OFFSET + 4 <= PARAMS_BYTES, "params arena too small");
// optimizer arena: the velocity slot (as the grads), then the control block
constexpr int64_t CONTROL_OFFSET = PARAMS_BYTES;
constexpr int64_t OPTIMIZER_BYTES =
    CONTROL_OFFSET + static_cast<int64_t>(sizeof(mpc_train_control));

// activations arena
constexpr int64_t X_OFFSET = 0;                             // [B, D] f32
constexpr int64_t Y_OFFSET = X_OFFSET + B * D * 4;          // [B] i32
constexpr int64_t LOSS_OFFSET = Y_OFFSET + B * 4;           // [] f32
constexpr int64_t LOGITS_OFFSET = 256;                      // [B, C] f32
constexpr int64_t PROBS_OFFSET = LOGITS_OFFSET + B * C * 4; // [B, C] f16
constexpr int64_t DLOGITS_OFFSET = 448; // [B, C] f32 scratch
constexpr int64_t XDROP_OFFSET = DLOGITS_OFFSET + B * C * 4; // [B, D] f32
constexpr int64_t ACTIVATIONS_BYTES = XDROP_OFFSET + B * D * 4;
static_assert(LOSS_OFFSET + 4 <= LOGITS_OFFSET, "overlap");
static_assert(PROBS_OFFSET + B * C * 2 <= DLOGITS_OFFSET, "overlap");

constexpr float KEEP_PROBABILITY = 0.75f;
constexpr int32_t IGNORE_INDEX = -100;

seen_context last_context;

template <typename T>
T *at(mpc_step_context *context, int arena, int64_t offset) {
  return reinterpret_cast<T *>(
      static_cast<unsigned char *>(context->arenas[arena]) + offset);
}

uint64_t mix(uint64_t value) {
  value += 0x9e3779b97f4a7c15ull;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
  return value ^ (value >> 31);
}

// Forward: dropout (training), logits = x w^T + b, softmax, mean
// cross-entropy over labels that are not ignored. Leaves the softmax in
// dlogits.
mpc_status forward(mpc_step_context *context) {
  last_context = {context->learning_rate, context->momentum,
                  context->weight_decay,  context->training,
                  context->step,          context->seed,
                  last_context.calls + 1};
  const float *x = at<float>(context, MPC_ARENA_ACTIVATIONS, X_OFFSET);
  const int32_t *y = at<int32_t>(context, MPC_ARENA_ACTIVATIONS, Y_OFFSET);
  float *xdrop = at<float>(context, MPC_ARENA_ACTIVATIONS, XDROP_OFFSET);
  float *logits = at<float>(context, MPC_ARENA_ACTIVATIONS, LOGITS_OFFSET);
  float *probs = at<float>(context, MPC_ARENA_ACTIVATIONS, DLOGITS_OFFSET);
  uint16_t *probs16 =
      at<uint16_t>(context, MPC_ARENA_ACTIVATIONS, PROBS_OFFSET);
  const float *w = at<float>(context, MPC_ARENA_PARAMS, W_OFFSET);
  const float *bias = at<float>(context, MPC_ARENA_PARAMS, B_OFFSET);

  for (int i = 0; i < B * D; ++i) {
    if (!context->training) {
      xdrop[i] = x[i];
      continue;
    }
    uint64_t bits =
        mix(context->seed ^
            mix(static_cast<uint64_t>(context->step) * 1000003u + i));
    bool keep =
        (bits >> 40) < static_cast<uint64_t>(KEEP_PROBABILITY * (1ull << 24));
    xdrop[i] = keep ? x[i] / KEEP_PROBABILITY : 0.0f;
  }
  // logits[B, C] = xdrop[B, D] . w[C, D]^T
  mpc_status status =
      mpc_rt_gemm(MPC_F32, MPC_F32, MPC_F32, /*trans_a=*/0, /*trans_b=*/1, B, C,
                  D, 1.0f, xdrop, D, 0, w, D, 0, 0.0f, logits, C, 0, 1);
  if (status != MPC_OK)
    return status;
  float total = 0.0f;
  int counted = 0;
  for (int i = 0; i < B; ++i) {
    float *row = logits + i * C;
    float max = row[0];
    for (int j = 0; j < C; ++j) {
      row[j] += bias[j];
      max = row[j] > max ? row[j] : max;
    }
    float sum = 0.0f;
    for (int j = 0; j < C; ++j)
      sum += std::exp(row[j] - max);
    for (int j = 0; j < C; ++j) {
      probs[i * C + j] = std::exp(row[j] - max) / sum;
      probs16[i * C + j] = mpc_f32_to_f16_bits(probs[i * C + j]);
    }
    if (y[i] == IGNORE_INDEX)
      continue;
    total += -(row[y[i]] - max - std::log(sum));
    ++counted;
  }
  *at<float>(context, MPC_ARENA_ACTIVATIONS, LOSS_OFFSET) =
      counted ? total / counted : 0.0f;
  return MPC_OK;
}

mpc_status linear_train_step(mpc_step_context *context) {
  if (mpc_status status = forward(context))
    return status;
  const int32_t *y = at<int32_t>(context, MPC_ARENA_ACTIVATIONS, Y_OFFSET);
  float *dlogits = at<float>(context, MPC_ARENA_ACTIVATIONS, DLOGITS_OFFSET);
  const float *xdrop = at<float>(context, MPC_ARENA_ACTIVATIONS, XDROP_OFFSET);
  int counted = 0;
  for (int i = 0; i < B; ++i)
    counted += y[i] != IGNORE_INDEX;
  // d loss / d logits = (softmax - onehot) / counted, 0 for ignored rows.
  for (int i = 0; i < B; ++i)
    for (int j = 0; j < C; ++j) {
      float &g = dlogits[i * C + j];
      g = y[i] == IGNORE_INDEX
              ? 0.0f
              : (g - (j == y[i] ? 1.0f : 0.0f)) / static_cast<float>(counted);
    }
  float *grad_w = at<float>(context, MPC_ARENA_GRADS, W_OFFSET);
  float *grad_b = at<float>(context, MPC_ARENA_GRADS, B_OFFSET);
  // grad_w[C, D] = dlogits[B, C]^T . xdrop[B, D]
  mpc_status status =
      mpc_rt_gemm(MPC_F32, MPC_F32, MPC_F32, /*trans_a=*/1, /*trans_b=*/0, C, D,
                  B, 1.0f, dlogits, C, 0, xdrop, D, 0, 0.0f, grad_w, D, 0, 1);
  if (status != MPC_OK)
    return status;
  for (int j = 0; j < C; ++j) {
    grad_b[j] = 0.0f;
    for (int i = 0; i < B; ++i)
      grad_b[j] += dlogits[i * C + j];
  }
  // SGD as torch.optim.SGD: g += wd * p; v = mu * v + g; p -= lr * v.
  float *params = at<float>(context, MPC_ARENA_PARAMS, 0);
  float *grads = at<float>(context, MPC_ARENA_GRADS, 0);
  float *velocity = at<float>(context, MPC_ARENA_OPTIMIZER, 0);
  for (int64_t i = 0; i < SEEN_OFFSET / 4; ++i) {
    float g = grads[i] + context->weight_decay * params[i];
    velocity[i] = context->momentum * velocity[i] + g;
    params[i] -= context->learning_rate * velocity[i];
  }
  *at<float>(context, MPC_ARENA_PARAMS, SEEN_OFFSET) += B;
  // Count the optimizer step as generated optimizers do (no loss scaling:
  // every step applies).
  static const mpc_loss_scaler_config no_scaling = {MPC_LOSS_SCALE_NONE};
  mpc_train_control *control =
      at<mpc_train_control>(context, MPC_ARENA_OPTIMIZER, CONTROL_OFFSET);
  control->applied =
      mpc_loss_scaler_transition(&no_scaling, &control->scaler, 0);
  return MPC_OK;
}

mpc_status linear_eval(mpc_step_context *context) { return forward(context); }

mpc_status index_error_train_step(mpc_step_context *context) {
  *context->index_error = 1;
  return MPC_OK;
}

mpc_tensor_desc tensor(const char *name, mpc_dtype dtype,
                       std::vector<int64_t> shape, int32_t arena,
                       int64_t offset) {
  mpc_tensor_desc desc = make_tensor(name, dtype, shape);
  desc.arena = arena;
  desc.offset = offset;
  return desc;
}

const char *const slot_names[] = {"momentum_buffer"};

struct linear_descriptors {
  mpc_tensor_desc inputs[2], params[2], states[1], outputs[3];
  mpc_model_desc model;
  mpc_model_desc failing;

  linear_descriptors() {
    inputs[0] = tensor("x", MPC_F32, {B, D}, MPC_ARENA_ACTIVATIONS, X_OFFSET);
    inputs[1] = tensor("y", MPC_I32, {B}, MPC_ARENA_ACTIVATIONS, Y_OFFSET);
    inputs[1].index_bound = C;
    inputs[1].has_ignore_index = 1;
    inputs[1].ignore_index = IGNORE_INDEX;
    params[0] = tensor("w", MPC_F32, {C, D}, MPC_ARENA_PARAMS, W_OFFSET);
    params[0].init_kind = MPC_INIT_KAIMING_UNIFORM;
    params[0].num_init_args = 1;
    params[0].init_args[0] = std::sqrt(5.0); // nn.Linear's default
    params[1] = tensor("b", MPC_F32, {C}, MPC_ARENA_PARAMS, B_OFFSET);
    params[1].init_kind = MPC_INIT_UNIFORM;
    params[1].num_init_args = 2;
    params[1].init_args[0] = -0.1;
    params[1].init_args[1] = 0.1;
    states[0] = tensor("seen", MPC_F32, {1}, MPC_ARENA_PARAMS, SEEN_OFFSET);
    outputs[0] =
        tensor("loss", MPC_F32, {}, MPC_ARENA_ACTIVATIONS, LOSS_OFFSET);
    outputs[1] =
        tensor("logits", MPC_F32, {B, C}, MPC_ARENA_ACTIVATIONS, LOGITS_OFFSET);
    outputs[2] =
        tensor("probs", MPC_F16, {B, C}, MPC_ARENA_ACTIVATIONS, PROBS_OFFSET);
    std::memset(&model, 0, sizeof(model));
    model.abi_version = MPC_MODEL_ABI_VERSION;
    model.name = "linear";
    model.target = MPC_TARGET_CPU;
    model.num_inputs = 2;
    model.inputs = inputs;
    model.num_params = 2;
    model.params = params;
    model.num_states = 1;
    model.states = states;
    model.num_outputs = 3;
    model.outputs = outputs;
    model.arena_bytes[MPC_ARENA_PARAMS] = PARAMS_BYTES;
    model.arena_bytes[MPC_ARENA_GRADS] = PARAMS_BYTES;
    model.arena_bytes[MPC_ARENA_OPTIMIZER] = OPTIMIZER_BYTES;
    model.arena_bytes[MPC_ARENA_ACTIVATIONS] = ACTIVATIONS_BYTES;
    model.optimizer_slots = 1;
    model.optimizer_slot_names = slot_names;
    model.optimizer_name = "sgd";
    model.accumulate_steps = 1;
    model.loss_scaling.mode = MPC_LOSS_SCALE_NONE;
    model.control_offset = CONTROL_OFFSET;
    model.default_learning_rate = 0.1f;
    model.default_momentum = 0.9f;
    model.default_weight_decay = 0.01f;
    model.train_step = linear_train_step;
    model.eval = linear_eval;
    failing = model;
    failing.train_step = index_error_train_step;
  }
};

const linear_descriptors &descriptors() {
  static const linear_descriptors instance;
  return instance;
}

} // namespace

const mpc_model_desc *linear_model() { return &descriptors().model; }
const mpc_model_desc *index_error_model() { return &descriptors().failing; }
seen_context last_linear_context() { return last_context; }

void linear_batch(int step, float *x, int32_t *y) {
  for (int i = 0; i < B * D; ++i)
    x[i] = static_cast<float>(mix(step * 7919u + i) >> 40) / (1 << 23) - 1.0f;
  for (int i = 0; i < B; ++i)
    y[i] = static_cast<int32_t>(mix(step * 104729u + 1000 + i) % C);
  if (step % 3 == 2)
    y[step % B] = IGNORE_INDEX;
}

// ----------------------------------------------------------------------------
// model_builder

mpc_tensor_desc make_tensor(const char *name, mpc_dtype dtype,
                            const std::vector<int64_t> &shape) {
  mpc_tensor_desc desc;
  std::memset(&desc, 0, sizeof(desc));
  desc.name = name;
  desc.dtype = dtype;
  desc.rank = static_cast<int32_t>(shape.size());
  desc.num_elements = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    desc.shape[d] = shape[d];
    desc.num_elements *= shape[d];
  }
  return desc;
}

namespace {
mpc_status do_nothing(mpc_step_context *) { return MPC_OK; }

int64_t lay_out(std::vector<mpc_tensor_desc> &tensors, int32_t arena,
                int64_t start) {
  int64_t offset = start;
  for (mpc_tensor_desc &tensor : tensors) {
    tensor.arena = arena;
    tensor.offset = offset;
    int64_t bytes = tensor.num_elements *
                    static_cast<int64_t>(mpc_dtype_size(tensor.dtype));
    offset += (bytes + 63) / 64 * 64;
  }
  return offset;
}
} // namespace

model_builder::model_builder(const char *name) {
  std::memset(&desc, 0, sizeof(desc));
  desc.abi_version = MPC_MODEL_ABI_VERSION;
  desc.name = keep(name);
  desc.target = MPC_TARGET_CPU;
  desc.optimizer_slots = 1;
  desc.optimizer_slot_names = slot_names;
  desc.optimizer_name = "sgd";
  desc.accumulate_steps = 1;
  desc.loss_scaling.mode = MPC_LOSS_SCALE_NONE;
  desc.default_learning_rate = 0.01f;
  desc.train_step = do_nothing;
  desc.eval = do_nothing;
}

const char *model_builder::keep(const char *text) {
  strings_.emplace_back(text);
  return strings_.back().c_str();
}

int model_builder::add_input(const char *name, mpc_dtype dtype,
                             std::vector<int64_t> shape) {
  inputs.push_back(make_tensor(keep(name), dtype, shape));
  return static_cast<int>(inputs.size()) - 1;
}

static void set_init(mpc_tensor_desc &tensor, mpc_init_kind kind,
                     const std::vector<double> &args) {
  tensor.init_kind = kind;
  tensor.num_init_args = static_cast<int32_t>(args.size());
  for (size_t i = 0; i < args.size() && i < 2; ++i)
    tensor.init_args[i] = args[i];
}

int model_builder::add_param(const char *name, mpc_dtype dtype,
                             std::vector<int64_t> shape, mpc_init_kind kind,
                             std::vector<double> args) {
  params.push_back(make_tensor(keep(name), dtype, shape));
  set_init(params.back(), kind, args);
  return static_cast<int>(params.size()) - 1;
}

int model_builder::add_state(const char *name, mpc_dtype dtype,
                             std::vector<int64_t> shape, mpc_init_kind kind,
                             std::vector<double> args) {
  states.push_back(make_tensor(keep(name), dtype, shape));
  set_init(states.back(), kind, args);
  return static_cast<int>(states.size()) - 1;
}

int model_builder::add_output(const char *name, mpc_dtype dtype,
                              std::vector<int64_t> shape) {
  outputs.push_back(make_tensor(keep(name), dtype, shape));
  return static_cast<int>(outputs.size()) - 1;
}

const mpc_model_desc *model_builder::finish() {
  int64_t params_end = lay_out(params, MPC_ARENA_PARAMS, 0);
  int64_t states_end = lay_out(states, MPC_ARENA_PARAMS, params_end);
  int64_t inputs_end = lay_out(inputs, MPC_ARENA_ACTIVATIONS, 0);
  int64_t outputs_end = lay_out(outputs, MPC_ARENA_ACTIVATIONS, inputs_end);
  desc.num_inputs = static_cast<int32_t>(inputs.size());
  desc.inputs = inputs.data();
  desc.num_params = static_cast<int32_t>(params.size());
  desc.params = params.data();
  desc.num_states = static_cast<int32_t>(states.size());
  desc.states = states.data();
  desc.num_outputs = static_cast<int32_t>(outputs.size());
  desc.outputs = outputs.data();
  desc.arena_bytes[MPC_ARENA_PARAMS] = states_end;
  desc.arena_bytes[MPC_ARENA_GRADS] = states_end;
  desc.control_offset = (desc.optimizer_slots * states_end + 63) / 64 * 64;
  desc.arena_bytes[MPC_ARENA_OPTIMIZER] =
      desc.control_offset + static_cast<int64_t>(sizeof(mpc_train_control));
  desc.arena_bytes[MPC_ARENA_ACTIVATIONS] = outputs_end;
  return &desc;
}

} // namespace mpc_test
