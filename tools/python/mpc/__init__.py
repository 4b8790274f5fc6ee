"""mpc from Python: train a model compiled with `mpc compile --shared`.

    mpc compile examples/mlp.mlir --shared -o out/      # out/libmlp.so
    PYTHONPATH=build/python python3

    import numpy as np, mpc
    model = mpc.load("out/libmlp.so")
    with model.session(seed=1) as session:
        loss = session.train_step(x, y)   # numpy arrays, as the model declares
        w = session.param("fc1.weight")   # float32, shaped
        session.save("mlp.safetensors")

Pure Python over libmpcrt's C API (runtime/mpc_runtime.h) with ctypes;
numpy is the only dependency. Inputs must have the declared shape and dtype
(float32, float16, int32, int64): nothing is converted silently. Every
failing call raises MpcError, carrying the C API's status and
mpc_last_error()'s message.
"""

import ctypes
import os
import re
import threading

import numpy as np

__all__ = ["load", "Model", "Session", "TensorInfo", "MpcError"]

_MAX_RANK = 8
_STATUS = {0: "MPC_OK", 1: "MPC_ERROR_INVALID_ARGUMENT",
           2: "MPC_ERROR_OUT_OF_RANGE", 3: "MPC_ERROR_IO",
           4: "MPC_ERROR_FORMAT", 5: "MPC_ERROR_NO_DEVICE",
           6: "MPC_ERROR_OUT_OF_MEMORY", 7: "MPC_ERROR_INTERNAL",
           8: "MPC_ERROR_COMMUNICATION", 9: "MPC_ERROR_UNSUPPORTED"}
# mpc_dtype -> (name, numpy dtype of its storage)
_DTYPES = {0: ("f32", np.float32), 1: ("f16", np.float16),
           2: ("bf16", np.uint16), 3: ("i32", np.int32), 4: ("i64", np.int64)}
_TARGETS = {"cpu": 0, "cuda": 1}


class MpcError(RuntimeError):
    """A failing mpc call: `status` names the mpc_status, the message is
    mpc_last_error()'s."""

    def __init__(self, status, message):
        self.status = _STATUS.get(status, str(status))
        super().__init__(f"{self.status}: {message}")


class _TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * _MAX_RANK),
                ("num_elements", ctypes.c_int64)]


class _SessionOptions(ctypes.Structure):
    _fields_ = [("target", ctypes.c_int), ("device", ctypes.c_int32),
                ("seed", ctypes.c_uint64), ("learning_rate", ctypes.c_float),
                ("momentum", ctypes.c_float),
                ("weight_decay", ctypes.c_float),
                ("cuda_graphs", ctypes.c_int32),
                ("data_parallel", ctypes.c_int32),
                ("collective_timeout_seconds", ctypes.c_float),
                ("threads", ctypes.c_int32)]


class _TrainingStats(ctypes.Structure):
    _fields_ = [("train_steps", ctypes.c_int64),
                ("optimizer_steps", ctypes.c_int64),
                ("skipped_steps", ctypes.c_int64),
                ("loss_scale", ctypes.c_float),
                ("steps_since_growth", ctypes.c_int32),
                ("hysteresis_left", ctypes.c_int32),
                ("last_step_scale", ctypes.c_float),
                ("last_skipped", ctypes.c_int32),
                ("grad_norm", ctypes.c_float),
                ("learning_rate", ctypes.c_float),
                ("gradients_nonfinite", ctypes.c_int64),
                ("fp8_saturated", ctypes.c_int64)]


class _NonfiniteReport(ctypes.Structure):
    _fields_ = [("found", ctypes.c_int32), ("op", ctypes.c_char_p),
                ("location", ctypes.c_char_p), ("backward", ctypes.c_int32),
                ("training", ctypes.c_int32), ("step", ctypes.c_int64),
                ("num_elements", ctypes.c_int64),
                ("nan_count", ctypes.c_int64), ("inf_count", ctypes.c_int64),
                ("max_abs_finite", ctypes.c_float),
                ("outside_half_range", ctypes.c_int64),
                ("loss_scale", ctypes.c_float),
                ("fp8_saturated", ctypes.c_int32),
                ("fp8_gemm_op", ctypes.c_char_p),
                ("fp8_gemm_location", ctypes.c_char_p),
                ("fp8_backward", ctypes.c_int32),
                ("fp8_operand", ctypes.c_char_p),
                ("fp8_format", ctypes.c_char_p),
                ("fp8_tensor_location", ctypes.c_char_p),
                ("fp8_num_elements", ctypes.c_int64),
                ("fp8_saturated_count", ctypes.c_int64),
                ("fp8_amax", ctypes.c_float),
                ("fp8_scale", ctypes.c_float)]


class _WeightsReport(ctypes.Structure):
    _fields_ = [("loaded", ctypes.c_int32), ("converted", ctypes.c_int32),
                ("missing", ctypes.c_int32), ("unexpected", ctypes.c_int32),
                ("missing_names", ctypes.c_char_p),
                ("unexpected_names", ctypes.c_char_p)]


def _bind(lib):
    """Declares the C API's signatures on `lib`, so that ctypes converts and
    checks every argument."""
    P, I32, I64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
    F, S, N = ctypes.POINTER(ctypes.c_float), ctypes.c_char_p, ctypes.c_size_t
    signatures = {
        "mpc_last_error": ([], S),
        "mpc_model_name": ([P], S),
        "mpc_model_num_inputs": ([P], I32),
        "mpc_model_num_params": ([P], I32),
        "mpc_model_num_states": ([P], I32),
        "mpc_model_num_outputs": ([P], I32),
        "mpc_model_input_info": ([P, I32, ctypes.POINTER(_TensorInfo)], I32),
        "mpc_model_param_info": ([P, I32, ctypes.POINTER(_TensorInfo)], I32),
        "mpc_model_state_info": ([P, I32, ctypes.POINTER(_TensorInfo)], I32),
        "mpc_model_output_info": ([P, I32, ctypes.POINTER(_TensorInfo)], I32),
        "mpc_session_options_init": ([ctypes.POINTER(_SessionOptions)], None),
        "mpc_session_create": ([P, ctypes.POINTER(_SessionOptions),
                                ctypes.POINTER(P)], I32),
        "mpc_session_destroy": ([P], None),
        "mpc_train_step": ([P, ctypes.POINTER(P), F], I32),
        "mpc_eval": ([P, ctypes.POINTER(P), F, ctypes.POINTER(P)], I32),
        "mpc_compute_gradients": ([P, ctypes.POINTER(P), F], I32),
        "mpc_get_gradient": ([P, S, F, N], I32),
        "mpc_get_param": ([P, S, F, N], I32),
        "mpc_set_param_shaped": ([P, S, F, ctypes.POINTER(I64), I32], I32),
        "mpc_set_learning_rate": ([P, ctypes.c_float], I32),
        "mpc_session_step": ([P], I64),
        "mpc_session_rank": ([P], I32),
        "mpc_session_world_size": ([P], I32),
        "mpc_session_threads": ([P], I32),
        "mpc_session_arena_bytes": ([P, I32], I64),
        "mpc_session_workspace_bytes": ([P], I64),
        "mpc_get_training_stats": ([P, ctypes.POINTER(_TrainingStats)], I32),
        "mpc_get_nonfinite_report": ([P, ctypes.POINTER(_NonfiniteReport)],
                                     I32),
        "mpc_save_checkpoint": ([P, S], I32),
        "mpc_load_checkpoint": ([P, S], I32),
        "mpc_checkpoint_was_verified": ([P], I32),
        "mpc_load_weights": ([P, S, I32, ctypes.POINTER(_WeightsReport)],
                             I32),
    }
    for name, (arguments, result) in signatures.items():
        function = getattr(lib, name)
        function.argtypes = arguments
        function.restype = result


class TensorInfo:
    """A model tensor's name, dtype ("f32", "f16", "bf16", "i32", "i64")
    and shape."""

    def __init__(self, info):
        self.name = info.name.decode()
        self.dtype, self.numpy_dtype = _DTYPES[info.dtype]
        self.shape = tuple(info.shape[i] for i in range(info.rank))

    def __repr__(self):
        return f"TensorInfo({self.name!r}, {self.dtype}, {self.shape})"


class Model:
    """A model library built with `mpc compile --shared` (lib<name>.so)."""

    def __init__(self, path, name=None):
        if name is None:
            match = re.fullmatch(r"lib([A-Za-z_][A-Za-z0-9_]*)\.so",
                                 os.path.basename(path))
            if not match:
                raise ValueError(f"{path}: expected lib<model>.so (from mpc "
                                 "compile --shared), or pass name=")
            name = match.group(1)
        self._lib = ctypes.CDLL(os.path.abspath(path))
        _bind(self._lib)
        try:
            descriptor = getattr(self._lib, f"mpc_model_{name}")
        except AttributeError:
            raise ValueError(f"{path} has no model '{name}' (no function "
                             f"mpc_model_{name})") from None
        descriptor.argtypes, descriptor.restype = [], ctypes.c_void_p
        self._desc = descriptor()
        self.name = self._lib.mpc_model_name(self._desc).decode()
        self.inputs = self._infos("input")
        self.params = self._infos("param")
        self.states = self._infos("state")
        self.outputs = self._infos("output")

    def _infos(self, kind):
        count = getattr(self._lib, f"mpc_model_num_{kind}s")(self._desc)
        infos = []
        for index in range(count):
            info = _TensorInfo()
            self._check(getattr(self._lib, f"mpc_model_{kind}_info")(
                self._desc, index, ctypes.byref(info)))
            infos.append(TensorInfo(info))
        return infos

    def _check(self, status):
        if status != 0:
            raise MpcError(status, self._lib.mpc_last_error().decode())

    def session(self, seed=0, learning_rate=None, momentum=None,
                weight_decay=None, target="cpu", device=0, cuda_graphs=False,
                data_parallel=False, collective_timeout=None, threads=None):
        """A training session; hyper-parameters left None take the values
        the model was compiled with. data_parallel: join the MPI job this
        process runs in (mpirun; a model built with --data-parallel), whose
        exchanges fail after collective_timeout seconds (None: 600) naming
        the ranks that did not arrive. threads: how many threads a cpu
        session's steps run on (None: $MPC_THREADS, else the cores); the
        results are the same bit for bit for any number."""
        return Session(self, seed, learning_rate, momentum, weight_decay,
                       target, device, cuda_graphs, data_parallel,
                       collective_timeout, threads)

    def __repr__(self):
        return f"Model({self.name!r}, inputs={self.inputs})"


def load(path, name=None):
    """The model in `path` (lib<name>.so from `mpc compile --shared`)."""
    return Model(path, name)


class Session:
    """One model's parameters, optimizer state and training step. Closed
    by close() or at the end of a `with` block; used by one thread at a
    time (the C API's rule)."""

    def __init__(self, model, seed, learning_rate, momentum, weight_decay,
                 target, device, cuda_graphs, data_parallel=False,
                 collective_timeout=None, threads=None):
        self.model = model
        self._lib = model._lib
        if target not in _TARGETS:
            raise ValueError(f"target {target!r}: expected 'cpu' or 'cuda'")
        options = _SessionOptions()
        self._lib.mpc_session_options_init(ctypes.byref(options))
        options.target = _TARGETS[target]
        options.device = device
        options.seed = seed
        options.cuda_graphs = int(bool(cuda_graphs))
        options.data_parallel = int(bool(data_parallel))
        if collective_timeout is not None:
            options.collective_timeout_seconds = collective_timeout
        if threads is not None:
            options.threads = threads
        for field, value in (("learning_rate", learning_rate),
                             ("momentum", momentum),
                             ("weight_decay", weight_decay)):
            if value is not None:
                setattr(options, field, value)
        handle = ctypes.c_void_p()
        self._check(self._lib.mpc_session_create(
            model._desc, ctypes.byref(options), ctypes.byref(handle)))
        self._handle = handle
        self._lock = threading.Lock()

    # -- plumbing --------------------------------------------------------

    def _check(self, status):
        if status != 0:
            raise MpcError(status, self._lib.mpc_last_error().decode())

    def _session(self):
        if self._handle is None:
            raise MpcError(1, "the session is closed")
        return self._handle

    def _inputs(self, arrays):
        inputs = self.model.inputs
        if len(arrays) != len(inputs):
            raise ValueError(
                f"model '{self.model.name}' takes {len(inputs)} inputs "
                f"({', '.join(i.name for i in inputs)}), got {len(arrays)}")
        kept, pointers = [], (ctypes.c_void_p * len(inputs))()
        for k, (info, array) in enumerate(zip(inputs, arrays)):
            if not isinstance(array, np.ndarray):
                raise TypeError(f"input '{info.name}': expected a numpy array, "
                                f"got {type(array).__name__}")
            if info.dtype == "bf16":
                raise TypeError(f"input '{info.name}' is bf16, which numpy "
                                "lacks: declare the model's input f32")
            if array.dtype != info.numpy_dtype:
                raise TypeError(f"input '{info.name}': dtype {array.dtype}, "
                                f"the model declares {info.dtype} "
                                f"({np.dtype(info.numpy_dtype)})")
            if array.shape != info.shape:
                raise ValueError(f"input '{info.name}': shape {array.shape}, "
                                 f"the model declares {info.shape}")
            array = np.ascontiguousarray(array)
            kept.append(array)
            pointers[k] = array.ctypes.data
        return kept, pointers

    def _tensor(self, name):
        for info in self.model.params + self.model.states:
            if info.name == name:
                return info
        known = ", ".join(i.name for i in self.model.params + self.model.states)
        raise MpcError(1, f"model '{self.model.name}' has no parameter or "
                          f"state '{name}' (it has {known})")

    @staticmethod
    def _floats(array):
        return array.ctypes.data_as(ctypes.POINTER(ctypes.c_float))

    # -- steps -----------------------------------------------------------

    def train_step(self, *inputs):
        """Forward, backward and optimizer update; returns the loss."""
        with self._lock:
            kept, pointers = self._inputs(inputs)
            loss = ctypes.c_float()
            self._check(self._lib.mpc_train_step(self._session(), pointers,
                                                 ctypes.byref(loss)))
            return loss.value

    def compute_gradients(self, *inputs):
        """Forward and backward, no update (see gradient()); the loss."""
        with self._lock:
            kept, pointers = self._inputs(inputs)
            loss = ctypes.c_float()
            self._check(self._lib.mpc_compute_gradients(
                self._session(), pointers, ctypes.byref(loss)))
            return loss.value

    def eval(self, *inputs):
        """Evaluation-mode forward pass: (loss, {output name: array}) for
        the outputs after the loss, in their declared dtypes (bf16 as
        float32)."""
        with self._lock:
            kept, pointers = self._inputs(inputs)
            extra = self.model.outputs[1:]
            arrays = [np.empty(info.shape, info.numpy_dtype) for info in extra]
            outputs = (ctypes.c_void_p * max(len(extra), 1))()
            for k, array in enumerate(arrays):
                outputs[k] = array.ctypes.data
            loss = ctypes.c_float()
            self._check(self._lib.mpc_eval(self._session(), pointers,
                                           ctypes.byref(loss), outputs))
            results = {}
            for info, array in zip(extra, arrays):
                if info.dtype == "bf16":  # the top half of an f32
                    array = (array.astype(np.uint32) << 16).view(np.float32)
                results[info.name] = array
            return loss.value, results

    # -- tensors ---------------------------------------------------------

    def param(self, name):
        """A parameter or state tensor as float32, in its shape."""
        with self._lock:
            info = self._tensor(name)
            array = np.empty(info.shape, np.float32)
            self._check(self._lib.mpc_get_param(
                self._session(), name.encode(), self._floats(array),
                array.size))
            return array

    def params(self):
        """Every parameter and state tensor by name."""
        return {info.name: self.param(info.name)
                for info in self.model.params + self.model.states}

    def set_param(self, name, value):
        """Sets a parameter or state tensor from an array of its shape (any
        float dtype; stored in the tensor's, rounded to nearest even)."""
        with self._lock:
            self._tensor(name)
            array = np.ascontiguousarray(value, dtype=np.float32)
            shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
            self._check(self._lib.mpc_set_param_shaped(
                self._session(), name.encode(), self._floats(array), shape,
                array.ndim))

    def gradient(self, name):
        """A parameter's gradient from the last train_step or
        compute_gradients, unscaled, as float32 in its shape."""
        with self._lock:
            info = self._tensor(name)
            array = np.empty(info.shape, np.float32)
            self._check(self._lib.mpc_get_gradient(
                self._session(), name.encode(), self._floats(array),
                array.size))
            return array

    # -- training state --------------------------------------------------

    def set_learning_rate(self, rate):
        with self._lock:
            self._check(self._lib.mpc_set_learning_rate(self._session(),
                                                        rate))

    @property
    def rank(self):
        """This process's rank in a data-parallel session (else 0)."""
        with self._lock:
            return self._lib.mpc_session_rank(self._session())

    @property
    def world_size(self):
        """Ranks of a data-parallel session (else 1)."""
        with self._lock:
            return self._lib.mpc_session_world_size(self._session())

    @property
    def threads(self):
        """Threads a cpu session's steps run on (1 on the cuda target)."""
        with self._lock:
            return self._lib.mpc_session_threads(self._session())

    def arena_bytes(self, arena):
        """Bytes this session holds for an arena: "params", "grads",
        "optimizer" or "activations" (a --shard-optimizer session's
        optimizer arena holds its rank's shard, with its shard of the
        master weights where they are sharded too)."""
        index = ["params", "grads", "optimizer", "activations"].index(arena)
        with self._lock:
            return self._lib.mpc_session_arena_bytes(self._session(), index)

    @property
    def workspace_bytes(self):
        """Device memory held beyond the arenas: a cuda session's own cuDNN
        workspace, where a convolution's plan needs more than planned."""
        with self._lock:
            return self._lib.mpc_session_workspace_bytes(self._session())

    @property
    def step(self):
        """Optimizer steps applied so far."""
        with self._lock:
            steps = self._lib.mpc_session_step(self._session())
            if steps < 0:
                raise MpcError(7, self._lib.mpc_last_error().decode())
            return steps

    def stats(self):
        """mpc_training_stats as a dict."""
        with self._lock:
            stats = _TrainingStats()
            self._check(self._lib.mpc_get_training_stats(
                self._session(), ctypes.byref(stats)))
            return {name: getattr(stats, name) for name, _ in stats._fields_}

    def nonfinite_report(self):
        """The first op with inf/NaN output in the last step (models built
        with --debug-nonfinite), as a dict; None when all were finite.
        Under delayed FP8 scaling, the first FP8 GEMM that read clipped
        values is in the fp8_* entries (fp8_saturated 1); the report is not
        None when there is one, even with every value finite (found 0)."""
        with self._lock:
            report = _NonfiniteReport()
            self._check(self._lib.mpc_get_nonfinite_report(
                self._session(), ctypes.byref(report)))
            if not report.found and not report.fp8_saturated:
                return None
            result = {name: getattr(report, name)
                      for name, _ in report._fields_}
            return {name: value.decode() if isinstance(value, bytes) else value
                    for name, value in result.items()}

    def save(self, path):
        """A safetensors checkpoint, written atomically."""
        with self._lock:
            self._check(self._lib.mpc_save_checkpoint(
                self._session(), os.fspath(path).encode()))

    def load(self, path):
        """Restores a checkpoint; returns whether its checksums were
        verified (False for a file without them)."""
        with self._lock:
            self._check(self._lib.mpc_load_checkpoint(
                self._session(), os.fspath(path).encode()))
            return bool(self._lib.mpc_checkpoint_was_verified(
                self._session()))

    def load_weights(self, path, strict=True):
        """Parameters and state by name from a safetensors file (a PyTorch
        state_dict saved with safetensors.torch.save_file, or a
        checkpoint), converted between f32, f16 and bf16; optimizer state
        and step unchanged. As torch's load_state_dict: returns
        (missing_keys, unexpected_keys), which `strict` requires empty."""
        with self._lock:
            report = _WeightsReport()
            self._check(self._lib.mpc_load_weights(
                self._session(), os.fspath(path).encode(), int(bool(strict)),
                ctypes.byref(report)))
            def names(text):
                return [n for n in text.decode().split("\n") if n]
            return (names(report.missing_names),
                    names(report.unexpected_names))

    # -- lifetime --------------------------------------------------------

    def close(self):
        with self._lock:
            if self._handle is not None:
                self._lib.mpc_session_destroy(self._handle)
                self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self.close()
