"""Fairway: collective communication for distributed deep learning.

`import fairway.torch` registers the "fairway" torch.distributed backend.
"""

__version__ = "0.1.0"
