//===- thread_pool_test.cpp - the cpu target's threads ----------*- C++ -*-===//
//
// The pool runs every part of every job exactly once, and work split over
// it computes the same bits as on one thread: launches of the generated
// code (mpc_rt_run_blocks) and GEMMs split by batch, rows and columns.
//
//===----------------------------------------------------------------------===//

#include "runtime/gemm.h"
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

extern "C" void mpc_rt_run_blocks(unsigned grid, long long work,
                                  void (*run)(void *body, unsigned begin,
                                              unsigned end),
                                  void *body);

namespace {

TEST(ThreadPool, RunsEveryPartOnceInEveryJob) {
  for (int threads : {1, 2, 3, 5}) {
    mpcrt::thread_pool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    std::vector<std::atomic<int>> counts(threads);
    struct job {
      std::vector<std::atomic<int>> *counts;
    } data{&counts};
    // Many short jobs back to back: the hand-over between the spinning and
    // the sleeping phases must never lose or repeat one.
    const int jobs = 3000;
    for (int j = 0; j < jobs; ++j) {
      int parts = 1 + j % threads;
      pool.run(
          parts,
          [](void *d, int part) {
            (*static_cast<job *>(d)->counts)[part].fetch_add(1);
          },
          &data);
    }
    for (int part = 0; part < threads; ++part) {
      int expected = 0;
      for (int j = 0; j < jobs; ++j)
        expected += part < 1 + j % threads;
      EXPECT_EQ(counts[part].load(), expected) << threads << " threads";
    }
  }
}

TEST(ThreadPool, SplitRangeCoversEveryIndexOnce) {
  for (int64_t count : {0, 1, 7, 64, 1001})
    for (int parts : {1, 2, 3, 8}) {
      int64_t next = 0;
      for (int part = 0; part < parts; ++part) {
        int64_t begin, end;
        mpcrt::split_range(count, parts, part, &begin, &end);
        EXPECT_EQ(begin, next);
        EXPECT_LE(begin, end);
        next = end;
      }
      EXPECT_EQ(next, count);
    }
}

// mpc_rt_run_blocks with a pool: every block once, whichever thread; below
// the work threshold, or outside a step, all on the calling thread.
TEST(ThreadPool, LaunchesRunEveryBlockOnce) {
  mpcrt::thread_pool pool(3);
  struct body {
    std::vector<std::atomic<int>> runs;
    std::atomic<int> off_caller{0};
    std::thread::id caller = std::this_thread::get_id();
    explicit body(unsigned grid) : runs(grid) {}
  };
  auto run = [](void *b, unsigned begin, unsigned end) {
    body &blocks = *static_cast<body *>(b);
    for (unsigned i = begin; i < end; ++i)
      blocks.runs[i].fetch_add(1);
    if (std::this_thread::get_id() != blocks.caller)
      blocks.off_caller.fetch_add(1);
  };
  for (bool in_step : {false, true})
    for (long long work : {1LL, 1LL << 40})
      for (unsigned grid : {1u, 2u, 7u, 100u}) {
        mpcrt::current_pool_scope scope(in_step ? &pool : nullptr);
        body blocks(grid);
        mpc_rt_run_blocks(grid, work, run, &blocks);
        for (unsigned i = 0; i < grid; ++i)
          EXPECT_EQ(blocks.runs[i].load(), 1) << "block " << i;
        bool spread = in_step && work > 1 && grid > 1;
        EXPECT_EQ(blocks.off_caller.load() > 0, spread)
            << "grid " << grid << " work " << work;
      }
}

// The same GEMM on one thread and split over 2 and 3: the same bytes of C,
// for splits by batch entries, by rows and by columns, f32 and half
// outputs, depths over several depth blocks, alpha and beta.
TEST(ThreadPool, GemmSplitsGiveTheBitsOfOneThread) {
  struct shape {
    int64_t m, n, k, batch;
    mpc_dtype ab, c;
    int32_t trans_a, trans_b;
    float beta;
  };
  const shape shapes[] = {
      {97, 31, 300, 1, MPC_F32, MPC_F32, 0, 0, 0.0f},    // rows
      {13, 250, 70, 1, MPC_F32, MPC_F32, 1, 1, 0.5f},    // columns
      {40, 40, 600, 5, MPC_BF16, MPC_BF16, 0, 1, 0.0f},  // batch
      {301, 17, 520, 1, MPC_F16, MPC_F16, 1, 0, 0.25f},  // rows, half C
      {6, 2100, 33, 2, MPC_BF16, MPC_F32, 0, 0, 0.0f},   // columns, 2 blocks
  };
  std::mt19937 generator(3);
  // Random finite values: f32 in [-1, 1), or half bit patterns with the
  // sign and the top exponent bit clear (below 2, never inf or NaN).
  auto fill = [&](std::vector<unsigned char> &bytes, size_t element) {
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::uniform_int_distribution<int> half(0, 0x3fff);
    for (size_t at = 0; at < bytes.size(); at += element) {
      if (element == 4) {
        float value = uniform(generator);
        std::memcpy(&bytes[at], &value, 4);
      } else {
        uint16_t value = static_cast<uint16_t>(half(generator));
        std::memcpy(&bytes[at], &value, 2);
      }
    }
  };
  for (const shape &s : shapes) {
    size_t ab = mpc_dtype_size(s.ab), cb = mpc_dtype_size(s.c);
    std::vector<unsigned char> a(s.m * s.k * s.batch * ab),
        b(s.k * s.n * s.batch * ab), c0(s.m * s.n * s.batch * cb);
    fill(a, ab);
    fill(b, ab);
    fill(c0, cb);
    std::vector<std::vector<unsigned char>> results;
    for (int threads : {1, 2, 3}) {
      mpcrt::thread_pool pool(threads);
      mpcrt::current_pool_scope scope(&pool);
      std::vector<unsigned char> c = c0;
      int64_t lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
      ASSERT_EQ(mpc_rt_gemm(s.ab, s.ab, s.c, s.trans_a, s.trans_b, s.m, s.n,
                            s.k, 0.75f, a.data(), lda, s.m * s.k, b.data(),
                            ldb, s.k * s.n, s.beta, c.data(), s.n, s.m * s.n,
                            s.batch),
                MPC_OK);
      results.push_back(c);
    }
    EXPECT_NE(results[0], c0) << "the GEMM wrote nothing";
    EXPECT_EQ(results[1], results[0]) << s.m << "x" << s.n << "x" << s.k;
    EXPECT_EQ(results[2], results[0]) << s.m << "x" << s.n << "x" << s.k;
  }
}

// The fused epilogues (GELU, its gradient, the bias gradient's row sums)
// split their rows over the threads: the same bits as on one thread.
TEST(ThreadPool, GemmEpiloguesGiveTheBitsOfOneThread) {
  const int64_t m = 67, n = 129, k = 40;
  std::mt19937 generator(5);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  auto values = [&](size_t count) {
    std::vector<float> v(count);
    for (float &x : v)
      x = uniform(generator);
    return v;
  };
  std::vector<float> a = values(m * k), b = values(k * n), bias = values(n),
                     gelu_input = values(m * n);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    mpcrt::thread_pool pool(threads);
    mpcrt::current_pool_scope scope(&pool);
    std::vector<float> c(m * n), gelu(m * n), dgelu(m * n), product(m * n),
        bias_grad(m);
    ASSERT_EQ(mpc_rt_gemm_bias_gelu(MPC_F32, MPC_F32, MPC_F32, 0, 0, m, n, k,
                                    1.0f, a.data(), k, 0, b.data(), n, 0,
                                    bias.data(), c.data(), n, 0, 1,
                                    gelu.data()),
              MPC_OK);
    ASSERT_EQ(mpc_rt_gemm_dgelu(MPC_F32, MPC_F32, MPC_F32, 0, 0, m, n, k,
                                1.0f, a.data(), k, b.data(), n,
                                gelu_input.data(), dgelu.data(), n),
              MPC_OK);
    ASSERT_EQ(mpc_rt_gemm_bgrad(MPC_F32, MPC_F32, MPC_F32, 0, 0, m, n, k, 1.0f,
                                a.data(), k, b.data(), n, product.data(), n,
                                MPC_F32, bias_grad.data()),
              MPC_OK);
    std::vector<float> all;
    for (const std::vector<float> *part :
         {&c, &gelu, &dgelu, &product, &bias_grad})
      all.insert(all.end(), part->begin(), part->end());
    results.push_back(all);
  }
  EXPECT_EQ(std::memcmp(results[1].data(), results[0].data(),
                        results[0].size() * sizeof(float)),
            0);
  EXPECT_EQ(std::memcmp(results[2].data(), results[0].data(),
                        results[0].size() * sizeof(float)),
            0);
}

} // namespace
