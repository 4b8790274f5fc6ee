//===- cudnn_graph_test.cpp - the convolution graphs cuDNN is given -------===//
//
// The operation graphs a cuda session plans its convolutions from
// (describe_convolution, runtime/cuda/cuda_conv.cpp), built for every
// convolution of the ResNet example (f32, dense) and of the grouped and
// depthwise test model (bf16), in every direction, against the library
// $MPC_CUDNN_LIBRARY names, or the toolkit's:
//   cuda.real_cudnn         the toolkit's cuDNN 9: it validates tensors,
//                           convolutions, operations and graphs without a
//                           GPU, so what the runtime builds is checked
//                           against cuDNN itself on every machine;
//   cuda.mock_cudnn_graphs  the mock (mock_cudnn.cpp) accepts and refuses
//                           the same graphs.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/cuda_internal.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

extern "C" const mpc_model_desc *mpc_model_resnet(void);
extern "C" const mpc_model_desc *mpc_model_mobile_convs(void);

namespace {

const mpcrt::Dnn &api() {
  const mpcrt::LoadedDnn &loaded = mpcrt::dnn();
  EXPECT_EQ(loaded.error, "");
  return loaded.api;
}

/// The convolutions of the linked models: every direction, and dense,
/// strided, grouped and depthwise shapes among them.
std::vector<mpc_conv_desc> convolutions() {
  std::vector<mpc_conv_desc> all;
  for (const mpc_model_desc *model :
       {mpc_model_resnet(), mpc_model_mobile_convs()})
    all.insert(all.end(), model->convolutions,
               model->convolutions + model->num_convolutions);
  return all;
}

void destroy(const mpcrt::Dnn &dnn,
             std::vector<cudnnBackendDescriptor_t> &owned) {
  for (cudnnBackendDescriptor_t descriptor : owned)
    dnn.destroyDescriptor(descriptor);
  owned.clear();
}

TEST(CudnnGraphs, EveryConvolutionOfTheModelsIsAccepted) {
  const mpcrt::Dnn &dnn = api();
  ASSERT_NE(dnn.finalize, nullptr);
  std::vector<mpc_conv_desc> all = convolutions();
  int directions[3] = {0, 0, 0}, grouped = 0;
  for (const mpc_conv_desc &desc : all) {
    ++directions[desc.direction];
    grouped += desc.x[1] != desc.w[1];
    std::vector<cudnnBackendDescriptor_t> owned;
    std::string why;
    EXPECT_TRUE(mpcrt::describe_convolution(dnn, desc, owned, why))
        << desc.origin << ": " << why;
    // Three tensors, the convolution, the operation and the graph.
    EXPECT_EQ(owned.size(), 6u);
    destroy(dnn, owned);
  }
  // Every direction, and grouped convolutions (depthwise among them).
  EXPECT_GT(directions[MPC_CONV_FORWARD], 0);
  EXPECT_GT(directions[MPC_CONV_BACKWARD_DATA], 0);
  EXPECT_GT(directions[MPC_CONV_BACKWARD_FILTER], 0);
  EXPECT_GT(grouped, 0);
}

TEST(CudnnGraphs, OutputThatDoesNotFollowIsRefused) {
  const mpcrt::Dnn &dnn = api();
  ASSERT_NE(dnn.finalize, nullptr);
  for (int direction = 0; direction < 3; ++direction) {
    mpc_conv_desc desc{};
    desc.origin = "test";
    desc.direction = direction;
    desc.x_dtype = desc.w_dtype = desc.y_dtype = MPC_F16;
    int64_t x[4] = {2, 8, 10, 10}, w[4] = {16, 8, 3, 3},
            y[4] = {2, 16, 9, 10}; // padding 1 keeps 10 rows, not 9
    std::copy(x, x + 4, desc.x);
    std::copy(w, w + 4, desc.w);
    std::copy(y, y + 4, desc.y);
    desc.stride[0] = desc.stride[1] = 1;
    desc.padding[0] = desc.padding[1] = 1;
    desc.dilation[0] = desc.dilation[1] = 1;
    std::vector<cudnnBackendDescriptor_t> owned;
    std::string why;
    EXPECT_FALSE(mpcrt::describe_convolution(dnn, desc, owned, why));
    EXPECT_EQ(why.rfind("cannot finalize the convolution operation: "
                        "CUDNN_STATUS_BAD_PARAM",
                        0),
              0u)
        << why;
    destroy(dnn, owned);
    // With 10 rows it is accepted.
    desc.y[2] = 10;
    why.clear();
    EXPECT_TRUE(mpcrt::describe_convolution(dnn, desc, owned, why)) << why;
    destroy(dnn, owned);
  }
}

} // namespace
