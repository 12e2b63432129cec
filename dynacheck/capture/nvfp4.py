"""Pure-torch NVFP4 reference: the same numbers FlashInfer's `fp4_quantize` kernel writes.

Convention (flashinfer 0.6.3 `quantization_utils.cuh::cvt_warp_fp16_to_fp4`, SGLang 0.5.9
`ModelOptFp4LinearMethod`): the caller passes a global scale `gs = 448 * 6 / amax` (SGLang's
`input_scale_inv`); each block of 16 values along K gets the E4M3 scale `fp8(gs * amax_block / 6)`;
values are `round_e2m1(x * gs / fp8_scale)` (round to nearest even, saturating at 6); two values
per byte, element 2i in the low nibble. Dequantize: `e2m1 * fp8_scale / gs`. Block scales come in
the linear `(m, k/16)` layout or FlashInfer's 128x4 swizzle (rows padded to 128, columns to 4).
"""

from __future__ import annotations

import torch

BLOCK = 16
E2M1_MAX = 6.0
E4M3_MAX = 448.0
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # codes 0..7; bit 3 is the sign


def global_scale_for(amax: torch.Tensor | float) -> torch.Tensor:
    """The per-tensor global scale FlashInfer expects: 448 * 6 / amax (float32, shape [1])."""
    amax_t = torch.as_tensor(amax, dtype=torch.float32).reshape(1)
    return (E4M3_MAX * E2M1_MAX) / amax_t.clamp(min=1e-12)


def e2m1_codes(v: torch.Tensor) -> torch.Tensor:
    """Round float32 values to 4-bit E2M1 codes (uint8, 0..15), round-to-nearest-even, saturating.

    Ties go to the even code: 0.25->0, 0.75->1.0, 1.25->1.0, 1.75->2.0, 2.5->2.0, 3.5->4.0, 5->4.0.
    """
    a = v.abs()
    mag = (
        (a > 0.25).to(torch.uint8)
        + (a >= 0.75).to(torch.uint8)
        + (a > 1.25).to(torch.uint8)
        + (a >= 1.75).to(torch.uint8)
        + (a > 2.5).to(torch.uint8)
        + (a >= 3.5).to(torch.uint8)
        + (a > 5.0).to(torch.uint8)
    )
    sign = torch.signbit(v).to(torch.uint8) << 3
    return mag | sign


def e2m1_values(codes: torch.Tensor) -> torch.Tensor:
    """Float32 values of 4-bit E2M1 codes, by arithmetic (a table would be a host-to-device copy,
    which is not allowed while a CUDA graph is being captured)."""
    exp = ((codes >> 1) & 3).float()
    man = (codes & 1).float()
    mag = torch.where(exp > 0, torch.exp2(exp - 1) * (1 + man * 0.5), man * 0.5)
    return torch.where((codes & 8) != 0, -mag, mag)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """(..., k) codes -> (..., k/2) bytes; element 2i is the low nibble (PTX cvt.e2m1x2 order)."""
    pairs = codes.reshape(*codes.shape[:-1], codes.shape[-1] // 2, 2)
    return pairs[..., 0] | (pairs[..., 1] << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    low = packed & 0x0F
    high = packed >> 4
    return torch.stack((low, high), dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def swizzled_sf_shape(m: int, k: int, sf_vec_size: int = BLOCK, row_tile: int = 128) -> tuple[int, int]:
    """Shape of FlashInfer's swizzled block scales after `fp4_quantize` reshapes them to (-1, k/sf)."""
    cols = k // sf_vec_size
    padded_rows = (m + row_tile - 1) // row_tile * row_tile
    padded_cols = (cols + 3) // 4 * 4
    if (padded_rows * padded_cols) % cols:
        raise ValueError(f"k/{sf_vec_size}={cols} does not divide the padded scale buffer "
                         "(FlashInfer's own reshape fails too)")
    return (padded_rows * padded_cols // cols, cols)


def swizzle_128x4(sf: torch.Tensor) -> torch.Tensor:
    """Linear (m, c) block scales -> flat 128x4 swizzle [m_tiles, c_tiles, 32, 4, 4], zero padded.

    Same permutation as SGLang's `process_weights_after_loading` and FlashInfer's
    `get_sf_out_offset_128x4`: row r, column c lands at
    tile(r//128, c//4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4.
    """
    m, c = sf.shape
    mp = (m + 127) // 128 * 128
    cp = (c + 3) // 4 * 4
    padded = torch.zeros((mp, cp), dtype=sf.dtype, device=sf.device)
    padded[:m, :c] = sf
    tiles = padded.reshape(mp // 128, 4, 32, cp // 4, 4).permute(0, 3, 2, 1, 4)
    return tiles.contiguous().reshape(-1)


def unswizzle_128x4(flat: torch.Tensor, m: int, c: int) -> torch.Tensor:
    """Inverse of `swizzle_128x4`: flat swizzled scales -> linear (m, c)."""
    mp = (m + 127) // 128 * 128
    cp = (c + 3) // 4 * 4
    tiles = flat.reshape(mp // 128, cp // 4, 32, 4, 4).permute(0, 3, 2, 1, 4)
    return tiles.reshape(mp, cp)[:m, :c]


def quantize(
    x: torch.Tensor, global_scale: torch.Tensor, *, swizzled: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize (m, k) to NVFP4 as `flashinfer.fp4_quantize(x, global_scale)` does.

    Returns packed uint8 values (m, k/2) and uint8 E4M3 block scales, shaped like FlashInfer's
    output: swizzled -> `swizzled_sf_shape(m, k)`, linear -> (m, k/16).
    """
    m, k = x.shape
    if k % BLOCK:
        raise ValueError(f"NVFP4 needs K to be a multiple of {BLOCK}, got {k}")
    xf = x.float().reshape(m, k // BLOCK, BLOCK)
    gs = global_scale.float().reshape(())
    block_amax = xf.abs().amax(dim=-1)
    sf = (gs * (block_amax * (1.0 / E2M1_MAX))).clamp(max=E4M3_MAX).to(torch.float8_e4m3fn)
    sf_f = sf.float()
    out_scale = torch.where(sf_f != 0, 1.0 / (sf_f * (1.0 / gs)), torch.zeros_like(sf_f))
    codes = e2m1_codes(xf * out_scale.unsqueeze(-1)).reshape(m, k)
    packed = pack_nibbles(codes)
    sf_u8 = sf.view(torch.uint8)
    if swizzled:
        return packed, swizzle_128x4(sf_u8).reshape(swizzled_sf_shape(m, k))
    return packed, sf_u8


def dequantize(
    packed: torch.Tensor,
    sf: torch.Tensor,
    global_scale: torch.Tensor,
    *,
    swizzled: bool = True,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Inverse of `quantize` (up to rounding): packed (m, k/2) + block scales -> (m, k)."""
    m, half_k = packed.shape
    k = half_k * 2
    cols = k // BLOCK
    sf_u8 = sf.view(torch.uint8) if sf.dtype != torch.uint8 else sf
    if swizzled:
        sf_u8 = unswizzle_128x4(sf_u8.reshape(-1), m, cols)
    scale = sf_u8.reshape(m, cols).view(torch.float8_e4m3fn).float() / global_scale.float().reshape(())
    vals = e2m1_values(unpack_nibbles(packed)).reshape(m, cols, BLOCK)
    return (vals * scale.unsqueeze(-1)).reshape(m, k).to(dtype)
