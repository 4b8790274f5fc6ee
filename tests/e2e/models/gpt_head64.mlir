// GPT-2's block (tools/bench/gpu_step.py's gpt_mlir: one layer, width 768, 12 heads
// of 64, vocabulary 256, context 128, batch 2), for tests/cuda: the cuda
// target's kernels at a head dimension of 64 compile without a spill, where
// ptxas's first choice spilled (see the cuda.compile.gpt_head64_* tests).
mpc.model @gpt_head64
    inputs(%idx: tensor<2x128xi32>, %targets: tensor<256xi32>)
    params(%wte.weight: tensor<256x768xf32> = normal(0.02),
           %wpe.weight: tensor<128x768xf32> = normal(0.02),
           %h0.ln_1.weight: tensor<768xf32> = ones,
           %h0.ln_1.bias: tensor<768xf32> = zeros,
           %h0.attn.qkv.weight: tensor<2304x768xf32> = normal(0.02),
           %h0.attn.qkv.bias: tensor<2304xf32> = zeros,
           %h0.attn.proj.weight: tensor<768x768xf32> = normal(0.02),
           %h0.attn.proj.bias: tensor<768xf32> = zeros,
           %h0.ln_2.weight: tensor<768xf32> = ones,
           %h0.ln_2.bias: tensor<768xf32> = zeros,
           %h0.mlp.fc.weight: tensor<3072x768xf32> = normal(0.02),
           %h0.mlp.fc.bias: tensor<3072xf32> = zeros,
           %h0.mlp.proj.weight: tensor<768x3072xf32> = normal(0.02),
           %h0.mlp.proj.bias: tensor<768xf32> = zeros,
           %ln_f.weight: tensor<768xf32> = ones,
           %ln_f.bias: tensor<768xf32> = zeros,
           %lm_head.weight: tensor<256x768xf32> = normal(0.02)) {
  %tok = mpc.embedding %wte.weight, %idx : tensor<256x768xf32>, tensor<2x128xi32>
  %x0 = mpc.add %tok, %wpe.weight : tensor<2x128x768xf32>, tensor<128x768xf32>
  %causal = mpc.causal_mask : tensor<128x128xi1>
  %neg_inf = mpc.constant dense<0xFF800000> : tensor<f32>
  %b0_ln1 = mpc.layer_norm %x0, %h0.ln_1.weight, %h0.ln_1.bias : tensor<2x128x768xf32>, tensor<768xf32>
  %b0_qkv = mpc.linear %b0_ln1, %h0.attn.qkv.weight, %h0.attn.qkv.bias : tensor<2x128x768xf32>, tensor<2304x768xf32>, tensor<2304xf32>
  %b0_q = mpc.slice %b0_qkv starts [0, 0, 0] limits [2, 128, 768] : tensor<2x128x2304xf32>
  %b0_k = mpc.slice %b0_qkv starts [0, 0, 768] limits [2, 128, 1536] : tensor<2x128x2304xf32>
  %b0_v = mpc.slice %b0_qkv starts [0, 0, 1536] limits [2, 128, 2304] : tensor<2x128x2304xf32>
  %b0_q4 = mpc.reshape %b0_q : tensor<2x128x768xf32> to tensor<2x128x12x64xf32>
  %b0_k4 = mpc.reshape %b0_k : tensor<2x128x768xf32> to tensor<2x128x12x64xf32>
  %b0_v4 = mpc.reshape %b0_v : tensor<2x128x768xf32> to tensor<2x128x12x64xf32>
  %b0_qh = mpc.transpose %b0_q4 perm [0, 2, 1, 3] : tensor<2x128x12x64xf32>
  %b0_kh = mpc.transpose %b0_k4 perm [0, 2, 1, 3] : tensor<2x128x12x64xf32>
  %b0_vh = mpc.transpose %b0_v4 perm [0, 2, 1, 3] : tensor<2x128x12x64xf32>
  %b0_qk = mpc.batch_matmul %b0_qh, %b0_kh transpose_rhs : tensor<2x12x128x64xf32>, tensor<2x12x128x64xf32>
  %b0_scores = mpc.scale %b0_qk by 0.125 : tensor<2x12x128x128xf32>
  %b0_masked = mpc.where %causal, %b0_scores, %neg_inf : tensor<128x128xi1>, tensor<2x12x128x128xf32>, tensor<f32>
  %b0_att = mpc.softmax %b0_masked dim 3 : tensor<2x12x128x128xf32>
  %b0_yh = mpc.batch_matmul %b0_att, %b0_vh : tensor<2x12x128x128xf32>, tensor<2x12x128x64xf32>
  %b0_yt = mpc.transpose %b0_yh perm [0, 2, 1, 3] : tensor<2x12x128x64xf32>
  %b0_y = mpc.reshape %b0_yt : tensor<2x128x12x64xf32> to tensor<2x128x768xf32>
  %b0_attn = mpc.linear %b0_y, %h0.attn.proj.weight, %h0.attn.proj.bias : tensor<2x128x768xf32>, tensor<768x768xf32>, tensor<768xf32>
  %x1 = mpc.add %x0, %b0_attn : tensor<2x128x768xf32>, tensor<2x128x768xf32>
  %b0_ln2 = mpc.layer_norm %x1, %h0.ln_2.weight, %h0.ln_2.bias : tensor<2x128x768xf32>, tensor<768xf32>
  %b0_fc = mpc.linear %b0_ln2, %h0.mlp.fc.weight, %h0.mlp.fc.bias : tensor<2x128x768xf32>, tensor<3072x768xf32>, tensor<3072xf32>
  %b0_gelu = mpc.gelu %b0_fc approximate tanh : tensor<2x128x3072xf32>
  %b0_mlp = mpc.linear %b0_gelu, %h0.mlp.proj.weight, %h0.mlp.proj.bias : tensor<2x128x3072xf32>, tensor<768x3072xf32>, tensor<768xf32>
  %x2 = mpc.add %x1, %b0_mlp : tensor<2x128x768xf32>, tensor<2x128x768xf32>
  %xf = mpc.layer_norm %x2, %ln_f.weight, %ln_f.bias : tensor<2x128x768xf32>, tensor<768xf32>
  %logits = mpc.linear %xf, %lm_head.weight : tensor<2x128x768xf32>, tensor<256x768xf32>
  %flat = mpc.reshape %logits : tensor<2x128x256xf32> to tensor<256x256xf32>
  %loss = mpc.cross_entropy %flat, %targets : tensor<256x256xf32>, tensor<256xi32>
  mpc.output loss(%loss : tensor<f32>) logits(%logits : tensor<2x128x256xf32>)
}
