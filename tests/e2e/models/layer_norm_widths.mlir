// Layer norms at the widths of transformers larger than GPT-2 small: 1,024
// (GPT-2 medium, BERT-large), 1,600 (GPT-2 XL) and 4,096 (7B-class models),
// each after a linear (so that its input gradient is taken), regressed onto
// targets. tests/cuda compiles it for the cuda target, where ptxas must
// find no spill in the norms' kernels: a block a row for each, holding 4, 7
// and 16 elements of x (and of dy for the gradient) a thread in registers.
mpc.model @layer_norm_widths
    inputs(%x: tensor<8x64xf32>, %target: tensor<8x16xf32>)
    params(%medium.weight: tensor<1024x64xf32> = normal(0.05),
           %medium.ln.weight: tensor<1024xf32> = ones,
           %medium.ln.bias: tensor<1024xf32> = zeros,
           %medium.out: tensor<16x1024xf32> = normal(0.02),
           %xl.weight: tensor<1600x64xf32> = normal(0.05),
           %xl.ln.weight: tensor<1600xf32> = ones,
           %xl.ln.bias: tensor<1600xf32> = zeros,
           %xl.out: tensor<16x1600xf32> = normal(0.02),
           %wide.weight: tensor<4096x64xf32> = normal(0.05),
           %wide.ln.weight: tensor<4096xf32> = ones,
           %wide.ln.bias: tensor<4096xf32> = zeros,
           %wide.out: tensor<16x4096xf32> = normal(0.02)) {
  %h1 = mpc.linear %x, %medium.weight : tensor<8x64xf32>, tensor<1024x64xf32>
  %n1 = mpc.layer_norm %h1, %medium.ln.weight, %medium.ln.bias
      : tensor<8x1024xf32>, tensor<1024xf32>
  %y1 = mpc.linear %n1, %medium.out : tensor<8x1024xf32>, tensor<16x1024xf32>
  %h2 = mpc.linear %x, %xl.weight : tensor<8x64xf32>, tensor<1600x64xf32>
  %n2 = mpc.layer_norm %h2, %xl.ln.weight, %xl.ln.bias
      : tensor<8x1600xf32>, tensor<1600xf32>
  %y2 = mpc.linear %n2, %xl.out : tensor<8x1600xf32>, tensor<16x1600xf32>
  %h3 = mpc.linear %x, %wide.weight : tensor<8x64xf32>, tensor<4096x64xf32>
  %n3 = mpc.layer_norm %h3, %wide.ln.weight, %wide.ln.bias
      : tensor<8x4096xf32>, tensor<4096xf32>
  %y3 = mpc.linear %n3, %wide.out : tensor<8x4096xf32>, tensor<16x4096xf32>
  %s = mpc.add %y1, %y2 : tensor<8x16xf32>, tensor<8x16xf32>
  %y = mpc.add %s, %y3 : tensor<8x16xf32>, tensor<8x16xf32>
  %loss = mpc.mse_loss %y, %target : tensor<8x16xf32>, tensor<8x16xf32>
  mpc.output loss(%loss : tensor<f32>)
}
