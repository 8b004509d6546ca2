"""DisTrO (DeMo) training: chunked DCT, top-k compression with error feedback, sign-SGD apply,
and the binary payload that travels inside a TrainingResult.

Needs the ``train`` extra (torch, numpy). The submodules import torch; this package file does not,
so ``import psyche_client.training`` works without it:

- ``dct``: orthonormal DCT-II/III bases and the per-parameter chunked 2-D transform;
- ``distro``: ``DistroOptimizer`` (``compress_step`` / ``apply_results``), ``SparseParam``,
  ``PeerResult``;
- ``payload``: ``encode_payload`` / ``decode_payload`` and ``peer_result_from_training_result``.
"""
