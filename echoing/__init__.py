"""Data echoing for tf.data: repeat the output of a slow input-pipeline stage.

>>> import tensorflow as tf, echoing
>>> [int(x) for x in tf.data.Dataset.range(2).apply(echoing.echo(2))]
[0, 0, 1, 1]
"""

from echoing.echo import echo
from echoing.measure import RatioMeasurement, measure_ratio
from echoing.stats import EchoStats

__all__ = ["echo", "EchoStats", "measure_ratio", "RatioMeasurement"]
__version__ = "0.1.0"
