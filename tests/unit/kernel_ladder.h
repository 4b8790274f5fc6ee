//===- kernel_ladder.h - variants of two kernels, counted -------*- C++ -*-===//
//
// Kernels written several ways, from naive to tuned, whose relative speed
// on a GPU is textbook (NVIDIA's "An Efficient Matrix Transpose in CUDA
// C/C++" and the CUDA C++ Best Practices Guide on coalescing and
// vectorised access), run under the block emulator with counting on. Built
// instrumented (kernel_ladder_kernels.cpp), so that their global accesses
// are counted; kernel_model_test.cpp prices them.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_TESTS_UNIT_KERNEL_LADDER_H
#define MPC_TESTS_UNIT_KERNEL_LADDER_H

#include "runtime/device/mpc_emulator.h"

namespace ladder {

/// out = inᵀ for an n x n f32 matrix, 32 x 32 tiles, blocks of 32 x 8
/// threads. naive: coalesced reads, writes a column at a time; tiled:
/// through a shared tile read down its columns (32-way bank conflicts);
/// padded: the tile's rows 33 words apart (none).
enum class transpose { naive, tiled, padded };
/// y[r][c] = x[r][c] * s[r] for rows x cols f32. naive: a thread a row,
/// lanes `cols` apart; coalesced: a thread an element; vectorised: a
/// thread four elements with 16-byte loads and stores.
enum class row_scale { naive, coalesced, vectorised };

struct counted {
  mpc_emu::launch_counters counters;
  double idealBytes; // what the kernel must move at least
};

counted run(transpose variant, int n);
counted run(row_scale variant, int rows, int cols);

} // namespace ladder

#endif // MPC_TESTS_UNIT_KERNEL_LADDER_H
