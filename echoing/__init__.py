"""Data echoing for tf.data: repeat the output of a slow input-pipeline stage.

>>> import tensorflow as tf, echoing
>>> [int(x) for x in tf.data.Dataset.range(2).apply(echoing.echo(2))]
[0, 0, 1, 1]
"""

from echoing.auto_echo import AutoEcho
from echoing.consumption import ConsumedExamples
from echoing.controller import Cause, ControllerSettings, EchoController, EchoDecision, Phase
from echoing.copy_cost import fit_copy_cost
from echoing import external_state, service
from echoing.echo import echo
from echoing.gradient_norms import microbatch_gradient_norms, stateless_microbatch_gradient_norms
from echoing.measure import RatioMeasurement, measure_ratio
from echoing.noise_scale import GradientNorms, NoiseScale, NoiseScaleEstimator
from echoing.noise_scale_callback import NoiseScaleCallback
from echoing.points import EchoPoint
from echoing.recommend import Recommendation, recommend
from echoing.stats import EchoStats

__all__ = [
    "Cause",
    "echo", "EchoPoint", "EchoStats", "ConsumedExamples", "external_state", "service", "measure_ratio", "RatioMeasurement",
    "AutoEcho", "EchoController", "ControllerSettings", "EchoDecision", "Phase", "fit_copy_cost", "recommend",
    "Recommendation",
    "GradientNorms", "NoiseScale", "NoiseScaleEstimator", "microbatch_gradient_norms", "stateless_microbatch_gradient_norms",
    "NoiseScaleCallback",
]
__version__ = "0.1.0"
