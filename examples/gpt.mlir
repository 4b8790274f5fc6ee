// A small GPT language model in the shape of GPT-2 / nanoGPT: vocabulary 64,
// context 16, width 32, 2 heads of 16, 2 pre-norm transformer blocks, batch 4.
//
//   x = wte[idx] + wpe                       token + position embeddings
//   for each block:
//     x = x + attn(layer_norm(x))            causal self-attention
//     x = x + mlp(layer_norm(x))             32 -> 128 -> gelu(tanh) -> 32
//   logits = lm_head(layer_norm(x))          untied, no bias
//   loss = cross_entropy(logits, targets)
//
// The context is the whole sequence, so the position table is added whole and
// broadcast over the batch: wpe [16, 32] + tok_emb [4, 16, 32]. Attention
// splits the qkv projection into q, k and v, moves the heads next to the
// batch ([B, H, T, Dh] = [4, 2, 16, 16]), and computes
// softmax(where(causal, q·kᵀ / sqrt(16), -inf)) · v.
//
// Names follow nanoGPT with `h<i>` for `transformer.h.<i>` and `qkv` / `proj`
// / `fc` for its `c_attn` / `c_proj` / `c_fc`. `targets` arrives flattened to
// [B*T], as nanoGPT's `targets.view(-1)`, because the loss is taken over
// logits reshaped to [B*T, V]. Weights start at normal(0.02), biases at zero,
// layer-norm gains at one. 30,080 parameters.
mpc.model @gpt
    inputs(%idx: tensor<4x16xi32>, %targets: tensor<64xi32>)
    params(%wte.weight: tensor<64x32xf32> = normal(0.02),
           %wpe.weight: tensor<16x32xf32> = normal(0.02),
           %h0.ln_1.weight: tensor<32xf32> = ones,
           %h0.ln_1.bias: tensor<32xf32> = zeros,
           %h0.attn.qkv.weight: tensor<96x32xf32> = normal(0.02),
           %h0.attn.qkv.bias: tensor<96xf32> = zeros,
           %h0.attn.proj.weight: tensor<32x32xf32> = normal(0.02),
           %h0.attn.proj.bias: tensor<32xf32> = zeros,
           %h0.ln_2.weight: tensor<32xf32> = ones,
           %h0.ln_2.bias: tensor<32xf32> = zeros,
           %h0.mlp.fc.weight: tensor<128x32xf32> = normal(0.02),
           %h0.mlp.fc.bias: tensor<128xf32> = zeros,
           %h0.mlp.proj.weight: tensor<32x128xf32> = normal(0.02),
           %h0.mlp.proj.bias: tensor<32xf32> = zeros,
           %h1.ln_1.weight: tensor<32xf32> = ones,
           %h1.ln_1.bias: tensor<32xf32> = zeros,
           %h1.attn.qkv.weight: tensor<96x32xf32> = normal(0.02),
           %h1.attn.qkv.bias: tensor<96xf32> = zeros,
           %h1.attn.proj.weight: tensor<32x32xf32> = normal(0.02),
           %h1.attn.proj.bias: tensor<32xf32> = zeros,
           %h1.ln_2.weight: tensor<32xf32> = ones,
           %h1.ln_2.bias: tensor<32xf32> = zeros,
           %h1.mlp.fc.weight: tensor<128x32xf32> = normal(0.02),
           %h1.mlp.fc.bias: tensor<128xf32> = zeros,
           %h1.mlp.proj.weight: tensor<32x128xf32> = normal(0.02),
           %h1.mlp.proj.bias: tensor<32xf32> = zeros,
           %ln_f.weight: tensor<32xf32> = ones,
           %ln_f.bias: tensor<32xf32> = zeros,
           %lm_head.weight: tensor<64x32xf32> = normal(0.02)) {
  // Embeddings: [4, 16] tokens -> [4, 16, 32], plus the [16, 32] positions.
  %tok = mpc.embedding %wte.weight, %idx : tensor<64x32xf32>, tensor<4x16xi32>
  %x0 = mpc.add %tok, %wpe.weight : tensor<4x16x32xf32>, tensor<16x32xf32>

  // Shared by both blocks: key j is visible to query i iff j <= i.
  %causal = mpc.causal_mask : tensor<16x16xi1>
  %neg_inf = mpc.constant dense<0xFF800000> : tensor<f32>

  //===--------------------------------------------------------------------===//
  // Block 0
  //===--------------------------------------------------------------------===//
  %b0_ln1 = mpc.layer_norm %x0, %h0.ln_1.weight, %h0.ln_1.bias
      : tensor<4x16x32xf32>, tensor<32xf32>
  %b0_qkv = mpc.linear %b0_ln1, %h0.attn.qkv.weight, %h0.attn.qkv.bias
      : tensor<4x16x32xf32>, tensor<96x32xf32>, tensor<96xf32>
  %b0_q = mpc.slice %b0_qkv starts [0, 0, 0] limits [4, 16, 32]
      : tensor<4x16x96xf32>
  %b0_k = mpc.slice %b0_qkv starts [0, 0, 32] limits [4, 16, 64]
      : tensor<4x16x96xf32>
  %b0_v = mpc.slice %b0_qkv starts [0, 0, 64] limits [4, 16, 96]
      : tensor<4x16x96xf32>
  // [B, T, C] -> [B, T, H, Dh] -> [B, H, T, Dh]
  %b0_q4 = mpc.reshape %b0_q : tensor<4x16x32xf32> to tensor<4x16x2x16xf32>
  %b0_k4 = mpc.reshape %b0_k : tensor<4x16x32xf32> to tensor<4x16x2x16xf32>
  %b0_v4 = mpc.reshape %b0_v : tensor<4x16x32xf32> to tensor<4x16x2x16xf32>
  %b0_qh = mpc.transpose %b0_q4 perm [0, 2, 1, 3] : tensor<4x16x2x16xf32>
  %b0_kh = mpc.transpose %b0_k4 perm [0, 2, 1, 3] : tensor<4x16x2x16xf32>
  %b0_vh = mpc.transpose %b0_v4 perm [0, 2, 1, 3] : tensor<4x16x2x16xf32>
  // Scores [B, H, T, T] = q·kᵀ / sqrt(Dh), masked, softmax over the keys.
  %b0_qk = mpc.batch_matmul %b0_qh, %b0_kh transpose_rhs
      : tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>
  %b0_scores = mpc.scale %b0_qk by 0.25 : tensor<4x2x16x16xf32>
  %b0_masked = mpc.where %causal, %b0_scores, %neg_inf
      : tensor<16x16xi1>, tensor<4x2x16x16xf32>, tensor<f32>
  %b0_att = mpc.softmax %b0_masked dim 3 : tensor<4x2x16x16xf32>
  %b0_yh = mpc.batch_matmul %b0_att, %b0_vh
      : tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>
  // [B, H, T, Dh] -> [B, T, H, Dh] -> [B, T, C]
  %b0_yt = mpc.transpose %b0_yh perm [0, 2, 1, 3] : tensor<4x2x16x16xf32>
  %b0_y = mpc.reshape %b0_yt : tensor<4x16x2x16xf32> to tensor<4x16x32xf32>
  %b0_attn = mpc.linear %b0_y, %h0.attn.proj.weight, %h0.attn.proj.bias
      : tensor<4x16x32xf32>, tensor<32x32xf32>, tensor<32xf32>
  %x1 = mpc.add %x0, %b0_attn : tensor<4x16x32xf32>, tensor<4x16x32xf32>

  %b0_ln2 = mpc.layer_norm %x1, %h0.ln_2.weight, %h0.ln_2.bias
      : tensor<4x16x32xf32>, tensor<32xf32>
  %b0_fc = mpc.linear %b0_ln2, %h0.mlp.fc.weight, %h0.mlp.fc.bias
      : tensor<4x16x32xf32>, tensor<128x32xf32>, tensor<128xf32>
  %b0_gelu = mpc.gelu %b0_fc approximate tanh : tensor<4x16x128xf32>
  %b0_mlp = mpc.linear %b0_gelu, %h0.mlp.proj.weight, %h0.mlp.proj.bias
      : tensor<4x16x128xf32>, tensor<32x128xf32>, tensor<32xf32>
  %x2 = mpc.add %x1, %b0_mlp : tensor<4x16x32xf32>, tensor<4x16x32xf32>

  //===--------------------------------------------------------------------===//
  // Block 1
  //===--------------------------------------------------------------------===//
  %b1_ln1 = mpc.layer_norm %x2, %h1.ln_1.weight, %h1.ln_1.bias
      : tensor<4x16x32xf32>, tensor<32xf32>
  %b1_qkv = mpc.linear %b1_ln1, %h1.attn.qkv.weight, %h1.attn.qkv.bias
      : tensor<4x16x32xf32>, tensor<96x32xf32>, tensor<96xf32>
  %b1_q = mpc.slice %b1_qkv starts [0, 0, 0] limits [4, 16, 32]
      : tensor<4x16x96xf32>
  %b1_k = mpc.slice %b1_qkv starts [0, 0, 32] limits [4, 16, 64]
      : tensor<4x16x96xf32>
  %b1_v = mpc.slice %b1_qkv starts [0, 0, 64] limits [4, 16, 96]
      : tensor<4x16x96xf32>
  %b1_q4 = mpc.reshape %b1_q : tensor<4x16x32xf32> to tensor<4x16x2x16xf32>
  %b1_k4 = mpc.reshape %b1_k : tensor<4x16x32xf32> to tensor<4x16x2x16xf32>
  %b1_v4 = mpc.reshape %b1_v : tensor<4x16x32xf32> to tensor<4x16x2x16xf32>
  %b1_qh = mpc.transpose %b1_q4 perm [0, 2, 1, 3] : tensor<4x16x2x16xf32>
  %b1_kh = mpc.transpose %b1_k4 perm [0, 2, 1, 3] : tensor<4x16x2x16xf32>
  %b1_vh = mpc.transpose %b1_v4 perm [0, 2, 1, 3] : tensor<4x16x2x16xf32>
  %b1_qk = mpc.batch_matmul %b1_qh, %b1_kh transpose_rhs
      : tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>
  %b1_scores = mpc.scale %b1_qk by 0.25 : tensor<4x2x16x16xf32>
  %b1_masked = mpc.where %causal, %b1_scores, %neg_inf
      : tensor<16x16xi1>, tensor<4x2x16x16xf32>, tensor<f32>
  %b1_att = mpc.softmax %b1_masked dim 3 : tensor<4x2x16x16xf32>
  %b1_yh = mpc.batch_matmul %b1_att, %b1_vh
      : tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>
  %b1_yt = mpc.transpose %b1_yh perm [0, 2, 1, 3] : tensor<4x2x16x16xf32>
  %b1_y = mpc.reshape %b1_yt : tensor<4x16x2x16xf32> to tensor<4x16x32xf32>
  %b1_attn = mpc.linear %b1_y, %h1.attn.proj.weight, %h1.attn.proj.bias
      : tensor<4x16x32xf32>, tensor<32x32xf32>, tensor<32xf32>
  %x3 = mpc.add %x2, %b1_attn : tensor<4x16x32xf32>, tensor<4x16x32xf32>

  %b1_ln2 = mpc.layer_norm %x3, %h1.ln_2.weight, %h1.ln_2.bias
      : tensor<4x16x32xf32>, tensor<32xf32>
  %b1_fc = mpc.linear %b1_ln2, %h1.mlp.fc.weight, %h1.mlp.fc.bias
      : tensor<4x16x32xf32>, tensor<128x32xf32>, tensor<128xf32>
  %b1_gelu = mpc.gelu %b1_fc approximate tanh : tensor<4x16x128xf32>
  %b1_mlp = mpc.linear %b1_gelu, %h1.mlp.proj.weight, %h1.mlp.proj.bias
      : tensor<4x16x128xf32>, tensor<32x128xf32>, tensor<32xf32>
  %x4 = mpc.add %x3, %b1_mlp : tensor<4x16x32xf32>, tensor<4x16x32xf32>

  //===--------------------------------------------------------------------===//
  // Head and loss
  //===--------------------------------------------------------------------===//
  %xf = mpc.layer_norm %x4, %ln_f.weight, %ln_f.bias
      : tensor<4x16x32xf32>, tensor<32xf32>
  %logits = mpc.linear %xf, %lm_head.weight
      : tensor<4x16x32xf32>, tensor<64x32xf32>
  %flat = mpc.reshape %logits : tensor<4x16x64xf32> to tensor<64x64xf32>
  %loss = mpc.cross_entropy %flat, %targets : tensor<64x64xf32>, tensor<64xi32>
  mpc.output loss(%loss : tensor<f32>) logits(%logits : tensor<4x16x64xf32>)
}
