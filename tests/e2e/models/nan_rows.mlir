// One op of each reduction family over rows of 1000 (3 or 4 elements per
// thread at 256 threads a block); nan_rows_test.cpp puts a NaN into one row
// and expects that row, and only it, to come out NaN.
mpc.model @nan_rows
    inputs(%x: tensor<4x1000xf32>, %y: tensor<4xi32>)
    params(%g: tensor<1000xf32> = ones, %b: tensor<1000xf32> = zeros) {
  %normed = mpc.layer_norm %x, %g, %b : tensor<4x1000xf32>, tensor<1000xf32>
  %loss = mpc.cross_entropy %normed, %y : tensor<4x1000xf32>, tensor<4xi32>
  %max = mpc.reduce_max %x dims [1] : tensor<4x1000xf32>
  %sum = mpc.reduce_sum %x dims [1] : tensor<4x1000xf32>
  %mean = mpc.reduce_mean %x dims [1] : tensor<4x1000xf32>
  %softmax = mpc.softmax %x dim 1 : tensor<4x1000xf32>
  %log_softmax = mpc.log_softmax %x dim 1 : tensor<4x1000xf32>
  mpc.output loss(%loss : tensor<f32>) max(%max : tensor<4xf32>)
      sum(%sum : tensor<4xf32>) mean(%mean : tensor<4xf32>)
      softmax(%softmax : tensor<4x1000xf32>)
      log_softmax(%log_softmax : tensor<4x1000xf32>)
      normed(%normed : tensor<4x1000xf32>)
}
