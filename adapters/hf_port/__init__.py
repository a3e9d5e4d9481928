"""The ``hf-transformers`` wrapper's operations, one module per spec family.

Each ``<family>.py`` holds a mixin ``Ops`` with that family's adapter methods and helpers;
``_common.py`` holds the helpers several families share.  The adapter class
(:mod:`posenc.adapters.hf_transformers`) is composed from them with
:func:`posenc.adapters.base.family_ports`.  Which HF code backs each operation: see the
docstring of :mod:`posenc.adapters.hf_transformers`.
"""
