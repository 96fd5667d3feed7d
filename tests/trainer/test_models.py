import pytest
import torch

from ddpjob_trainer import UsageError
from ddpjob_trainer.models import build_model


def test_mlp_is_the_tutorial_model():
    m = build_model("mlp", (1, 28, 28), 10)
    linears = [layer for layer in m if isinstance(layer, torch.nn.Linear)]
    assert [(layer.in_features, layer.out_features) for layer in linears] == [(784, 512), (512, 256), (256, 10)]
    assert m(torch.randn(3, 1, 28, 28)).shape == (3, 10)


@pytest.mark.parametrize("name,shape", [("cnn", (1, 28, 28)), ("cnn", (3, 32, 32)), ("resnet18", (1, 28, 28))])
def test_models_take_the_data_shape(name, shape):
    m = build_model(name, shape, 7).eval()
    assert m(torch.randn(2, *shape)).shape == (2, 7)


def test_unknown_model_is_usage_error():
    with pytest.raises(UsageError, match="unknown model 'resnet9000'"):
        build_model("resnet9000", (1, 28, 28), 10)
