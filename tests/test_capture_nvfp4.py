"""The NVFP4 reference quantizer against hand-computed FP4 values (FlashInfer 0.6.3 convention)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from dynacheck.capture import nvfp4  # noqa: E402
from dynacheck.fixes.known_fakes import fp4_scale_shape  # noqa: E402


def test_e2m1_rounding_is_nearest_even_and_saturating():
    v = torch.tensor([0.0, 0.2, 0.25, 0.26, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.1, 6.0, 7.0, 100.0])
    got = nvfp4.e2m1_values(nvfp4.e2m1_codes(v)).tolist()
    #          0    0.2   .25 tie->0  .26   .75->1  1.25->1 1.75->2 2.5->2  3.5->4  5->4   5.1->6  6    7->6   sat
    assert got == [0.0, 0.0, 0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0, 6.0, 6.0]


def test_negative_values_set_the_sign_bit():
    codes = nvfp4.e2m1_codes(torch.tensor([-0.5, -6.0, -0.1, 0.5]))
    assert codes.tolist() == [0x9, 0xF, 0x8, 0x1]  # -0.1 rounds to -0 (sign kept, as cvt.rn does)


def test_code_table_covers_all_sixteen_codes():
    vals = nvfp4.e2m1_values(torch.arange(16, dtype=torch.uint8)).tolist()
    assert vals[:8] == list(nvfp4.E2M1_VALUES)
    assert vals[8:] == [-v for v in nvfp4.E2M1_VALUES]


def test_packing_puts_the_even_element_in_the_low_nibble():
    codes = torch.tensor([[0x1, 0x7, 0xF, 0x2]], dtype=torch.uint8)
    packed = nvfp4.pack_nibbles(codes)
    assert packed.tolist() == [[0x71, 0x2F]]
    assert torch.equal(nvfp4.unpack_nibbles(packed), codes)


def test_block_scale_and_values_by_hand():
    # One row, one block of 16: amax 3.0, global scale 448*6/3 = 896.
    x = torch.tensor([[3.0, -1.5, 0.75, 0.1] + [0.0] * 12])
    gs = nvfp4.global_scale_for(3.0)
    assert float(gs) == pytest.approx(896.0)
    packed, sf = nvfp4.quantize(x, gs, swizzled=False)
    # block scale = fp8(896 * 3/6) = fp8(448) = 448 -> e4m3 byte 0x7E
    assert sf.tolist() == [[0x7E]]
    # values scaled by gs/448 = 2: 6.0, -3.0, 1.5, 0.2 -> codes 7, 0xD, 3, 0
    assert nvfp4.unpack_nibbles(packed)[0, :4].tolist() == [0x7, 0xD, 0x3, 0x0]
    deq = nvfp4.dequantize(packed, sf, gs, swizzled=False)
    assert deq[0, :4].tolist() == [3.0, -1.5, 0.75, 0.0]


def test_block_scale_rounds_to_e4m3():
    # amax of the block 1.0 with global scale 896: 896/6 = 149.33 -> e4m3 nearest is 144 (step 16 at 128..256)
    x = torch.zeros(1, 16)
    x[0, 0] = 1.0
    _, sf = nvfp4.quantize(x, nvfp4.global_scale_for(3.0), swizzled=False)
    assert float(sf.view(torch.float8_e4m3fn).float()) == 144.0


def test_representable_values_round_trip_exactly():
    torch.manual_seed(0)
    codes = torch.randint(0, 16, (5, 64), dtype=torch.uint8)
    x = nvfp4.e2m1_values(codes)
    x[:, ::16] = 6.0  # every block's amax is 6 -> block scale is exactly 448/... with gs = 448
    gs = nvfp4.global_scale_for(6.0)
    packed, sf = nvfp4.quantize(x, gs)
    assert torch.equal(nvfp4.dequantize(packed, sf, gs), x)


def test_swizzle_offsets_follow_flashinfer_128x4_formula():
    m, c = 130, 6
    sf = torch.arange(m * c, dtype=torch.int32).reshape(m, c)
    flat = nvfp4.swizzle_128x4(sf)
    c_tiles = (c + 3) // 4
    for r, k in [(0, 0), (1, 0), (31, 3), (32, 0), (127, 5), (128, 1), (129, 5)]:
        offset = (r // 128) * c_tiles * 512 + (k // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + k % 4
        assert int(flat[offset]) == int(sf[r, k])
    assert flat.numel() == 256 * 8  # rows padded to 256, columns to 8
    assert torch.equal(nvfp4.unswizzle_128x4(flat, m, c), sf)


def test_swizzle_matches_sglang_weight_interleave():
    # SGLang's process_weights_after_loading: reshape(B, M/128, 4, 32, K/4, 4).permute(0, 1, 4, 3, 2, 5)
    sf = torch.randint(0, 255, (256, 8), dtype=torch.uint8)
    sglang = sf.reshape(1, 2, 4, 32, 2, 4).permute(0, 1, 4, 3, 2, 5).contiguous().reshape(-1)
    assert torch.equal(nvfp4.swizzle_128x4(sf), sglang)


@pytest.mark.parametrize("m,k", [(1, 6144), (3, 2048), (128, 512), (130, 12288), (257, 576)])
def test_quantize_output_shapes_equal_the_fake_formula(m, k):
    x = torch.randn(m, k)
    gs = nvfp4.global_scale_for(x.abs().amax())
    q, sf = nvfp4.quantize(x, gs)
    assert q.shape == (m, k // 2) and q.dtype == torch.uint8
    assert tuple(sf.shape) == fp4_scale_shape(m, k) and sf.dtype == torch.uint8
    _, lin = nvfp4.quantize(x, gs, swizzled=False)
    assert tuple(lin.shape) == fp4_scale_shape(m, k, swizzled=False) == (m, k // 16)


def test_k_not_a_multiple_of_16_is_rejected():
    with pytest.raises(ValueError, match="multiple of 16"):
        nvfp4.quantize(torch.randn(2, 24), torch.tensor([1.0]))
