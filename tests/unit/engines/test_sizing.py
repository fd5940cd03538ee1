"""Memory arithmetic from recorded model shapes and a recorded llama.cpp load log."""

import pytest

from servebook.engines import get_engine
from servebook.engines.sizing import ModelShape, check_against_engine, fit, replica_table

LLAMA_31_8B = {"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
               "vocab_size": 128256, "intermediate_size": 14336, "torch_dtype": "bfloat16",
               "max_position_embeddings": 131072}
# llama-server 0.3.36, tiny:target, -np 2 -c 4096 -lv 4 (recorded)
LOAD_LOG = ("0.00.451.113 I llama_kv_cache:        CPU KV buffer size =     8.00 MiB\n"
            "0.00.454.267 I llama_kv_cache: size =    8.00 MiB (  2048 cells,   4 layers,  2/2 seqs), "
            "K (f16):    4.00 MiB, V (f16):    4.00 MiB\n")


def test_kv_bytes_per_token_of_a_public_shape():
    shape = ModelShape.from_config(LLAMA_31_8B, "llama-3.1-8b")
    assert shape.kv_bytes_per_token("bf16") == 32 * 8 * 128 * 2 * 2 == 131072
    assert shape.kv_bytes_per_token("fp8") == 65536
    assert shape.weight_bytes / 2**30 == pytest.approx(14.96, rel=0.01)  # 8.03B parameters in bf16


def test_more_tensor_parallel_means_fewer_replicas_but_more_room_each():
    shape = ModelShape.from_config(LLAMA_31_8B)
    fits = replica_table(shape, gpu_gib=141, context_length=32768, gpus=8)
    assert [f.tensor_parallel for f in fits] == [1, 2, 4, 8] and [f.replicas for f in fits] == [8, 4, 2, 1]
    assert fits[0].token_pool < fits[1].token_pool < fits[3].token_pool
    # weights are paid once per replica: the whole host holds the most tokens with the widest replica
    assert fits[0].total_requests <= fits[-1].total_requests
    assert fit(shape, gpu_gib=16, tensor_parallel=1, context_length=32768).token_pool == 0


def test_hybrid_models_pay_a_fixed_state_per_request():
    hybrid = {**LLAMA_31_8B, "layer_types": ["linear_attention"] * 24 + ["full_attention"] * 8,
              "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128}
    shape = ModelShape.from_config(hybrid)
    assert shape.attention_layers == 8 and shape.kv_bytes_per_token("bf16") == 8 * 8 * 128 * 2 * 2
    assert shape.recurrent_state_bytes == 24 * 32 * 128 * 128 * 4


def test_the_arithmetic_is_checked_against_llamacpp_s_logged_kv_buffer():
    logged = get_engine("llamacpp").logged_kv_cache(LOAD_LOG)
    assert (logged.cells, logged.bytes, logged.k_type) == (4096, 8 * 2**20, "f16")
    tiny = ModelShape("tiny", layers=4, attention_layers=4, kv_heads=2, head_dim=64, weight_bytes=84091904)
    assert check_against_engine(tiny, logged.cells, logged.bytes, "f16").agrees
    wrong = ModelShape("tiny", layers=4, attention_layers=4, kv_heads=4, head_dim=64, weight_bytes=84091904)
    assert not check_against_engine(wrong, logged.cells, logged.bytes, "f16").agrees
    assert get_engine("sglang").logged_kv_cache(LOAD_LOG) is None


def test_size_model_reads_a_config_and_refuses_what_it_cannot_read(tmp_path):
    import json

    import servebook as sb
    from servebook.config.errors import InputError

    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text(json.dumps(LLAMA_31_8B))
    view = sb.size_model(str(tmp_path / "llama"), gpu_gib=141, gpus=8, context_length=32768, kv_dtype="fp8")
    assert [f.tensor_parallel for f in view.fits] == [1, 2, 4, 8]
    assert "(65,536 B per token, fp8)" in " ".join(str(view).split())
    with pytest.raises(InputError, match="not found"):
        sb.size_model(str(tmp_path / "missing.gguf"))
    (tmp_path / "broken.json").write_text("{}")
    with pytest.raises(InputError, match="cannot read its shape"):
        sb.size_model(str(tmp_path / "broken.json"))


def test_glm_5_3_flash_as_seed_001_describes_it():
    """Seed 001's arithmetic, term by term; where servebook's figure differs, the assumption that differs."""
    from servebook.util.paths import repo_data_dir

    shape = ModelShape.from_file(repo_data_dir() / "models" / "glm-5.3-flash")
    assert (shape.layers, shape.attention_layers, shape.weight_bytes / 2**30) == (45, 11, pytest.approx(190.4))
    # seed: 11 KiB per token for the 512-value latent; servebook also keeps the 64-value rotary key beside it
    assert 11 * 512 * 2 == 11 * 1024 and shape.latent_values == 512 + 64
    assert shape.kv_bytes_per_token("bf16") - shape.indexer_bytes_per_token("bf16") == 12_672
    assert shape.indexer_bytes_per_token("bf16") == 2.75 * 1024  # the seed's "at most 2.75 KiB"
    assert shape.recurrent_state_bytes == 136 * 2**20  # 34 KDA layers x 64 heads x 128 x 128 x FP32
    rtx = dict(gpu_gib=83.04, tensor_parallel=4, context_length=32768, gpus=4, memory_fraction=1, overhead_gib=0)
    per_card = fit(shape, kv_dtype="bf16", **rtx)
    # seed's own arithmetic: 0.46 GiB per conversation per card (0.43 of KV + a quarter of the state); servebook's
    # 0.506 adds the rotary key; the seed plans with 0.69 (a vendor's ratio) and gets about 51
    assert per_card.request_bytes_per_gpu / 2**30 == pytest.approx(0.506, abs=0.001)
    assert per_card.requests_at_context == 70
    assert fit(shape, kv_dtype="fp8_e4m3", **rtx).requests_at_context == 131  # seed: about 100
