"""The kit's own JAX port, one module per spec family (see ``adapters/jax_adapter.py``).

Each family module holds a mixin ``Ops`` with that family's adapter operations and the
family's module-level kernels; ``_common`` holds what several families share (and switches
``jax_enable_x64`` on).  The adapter class is composed with
:func:`posenc.adapters.base.family_ports`.
"""
