"""The kit's TensorFlow port, one module per spec family (see ``posenc.adapters.tf_adapter``).

Each family module defines its kernels and a mixin ``Ops`` with that family's adapter methods;
``_common`` holds what several families share (dtypes, devices, :func:`exact_div`, the shared
kernels and the machinery that runs a kernel eagerly or through ``tf.function``).  The adapters
are composed with ``posenc.adapters.base.family_ports`` in ``posenc.adapters.tf_adapter``.
"""
