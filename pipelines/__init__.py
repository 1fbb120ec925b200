"""Standard input pipelines with named echo points, and simulated slow storage.

Everything a user needs is importable from here:

>>> import pipelines
>>> config = pipelines.ImagePipelineConfig(
...     source="shapes", batch_size=4, num_train_examples=64, num_eval_examples=16,
...     echo=pipelines.EchoConfig(pipelines.BEFORE_AUGMENT, factor=2))
>>> images, labels = next(iter(pipelines.image_train_dataset(config)))
>>> tuple(images.shape), pipelines.IMAGE_ECHO_POINTS
((4, 32, 32, 3), ('before_augment', 'after_augment', 'after_batch'))
"""

from pipelines.image import ECHO_POINTS as IMAGE_ECHO_POINTS
from pipelines.image import ImagePipelineConfig
from pipelines.image import eval_dataset as image_eval_dataset
from pipelines.image import train_dataset as image_train_dataset
from pipelines.slow_storage import RateLimiter, throttle
from pipelines.staged import AFTER_AUGMENT, AFTER_BATCH, BEFORE_AUGMENT, EXAMPLE, NONE, PLACEMENTS, EchoConfig
from pipelines.text import ECHO_POINTS as TEXT_ECHO_POINTS
from pipelines.text import TextPipelineConfig
from pipelines.text import eval_dataset as text_eval_dataset
from pipelines.text import train_dataset as text_train_dataset

__all__ = [
    "EchoConfig", "PLACEMENTS", "NONE", "EXAMPLE", "BEFORE_AUGMENT", "AFTER_AUGMENT", "AFTER_BATCH",
    "ImagePipelineConfig", "image_train_dataset", "image_eval_dataset", "IMAGE_ECHO_POINTS",
    "TextPipelineConfig", "text_train_dataset", "text_eval_dataset", "TEXT_ECHO_POINTS",
    "throttle", "RateLimiter",
]
