"""Shared fixtures: the synthetic checkpoint (generated once into data/) and transformers' view of it."""
import pytest
import torch

from qwen.synthetic import synthetic_path


@pytest.fixture(scope="session")
def synthetic():
    return synthetic_path()


@pytest.fixture(scope="session")
def hf_model(synthetic):
    """transformers' Qwen3.5 text model on the same checkpoint, in fp32: the oracle."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(synthetic, dtype=torch.float32)
    return model.eval()
