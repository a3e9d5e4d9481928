"""``posenc card``: a positional-encoding card of one model.

A card gathers what a reviewer asks of a model's positions: the family and every spec parameter
with its provenance (the config key it was read from, the library default, the registry's
source), the clauses that apply (with their papers) and each wrapped implementation's status on
them (:func:`posenc.tools.matrix_status.clause_status`), and the figures: learned tables'
parameter counts, the wavelength of every RoPE pair against the context, the pairs that never
complete a turn, the YaRN ramp and the llama3 band in pair indices, the angle reached at the end
of the context with and without scaling, the ALiBi slopes, the T5 bucket map.  Every figure is
computed by the kit's float64 reference (:mod:`posenc.reference`), so the card shows what the
spec says, not a second derivation.

Sources (:func:`build_card`): a Hugging Face ``config.json`` (read by the config import,
:mod:`posenc.hf`, which records the provenance), a registry model name
(``spec/registry/models.yaml``: the entry's parameters and sources), or ``hf:<model_type>``
(the transformers config class's defaults, through the same import).

Output: Markdown (:meth:`Card.to_markdown`), reStructuredText for the site
(:meth:`Card.to_rst`) and PNG plots (:meth:`Card.write_plots`; matplotlib, the ``[docs]`` extra).

Every string from outside the kit (the config's name, model_type, keys, values, the provenance
and notes built from them, registry text, the path) is plain text in both outputs: one line,
every character that could start Markdown markup or raw HTML backslash-escaped, every ASCII
punctuation character backslash-escaped in RST (no directive, role, reference or link can be
made of it); the card's file names are slugs (``[a-z0-9.-]``, at most :data:`MAX_SLUG` characters).

Scaled RoPE (yarn, llama3, longrope, dynamic) gets its turn counts and end angles at the context,
the original context and the extended context (factor x original, or the context where larger;
dynamic: factor x max_position_embeddings), each labelled.  A context read from the config may be
an integral float (``128.0``); a fraction or a non-number is an error naming the key, never a
fallback to the class default.  Sizes a card computes over are bounded (:data:`MAX_HEAD_DIM`,
:data:`MAX_HEADS`, :data:`MAX_T5`, :data:`MAX_TABLE_ROWS`, :data:`MAX_LENGTH`: an error naming
the field), and a table of more than :data:`MAX_ROWS` rows is summarised (first and last rows and
the rows at each boundary).

``posenc card`` (:func:`main`) writes into ``--out DIR`` (default ``posenc-card-<name>``) only where
DIR is new, empty or a previous card's output (it holds :data:`OUT_MARKER`, which every card output
gets); an existing other folder or a file is an error.  Without matplotlib the card is still made,
in both formats: the Markdown or the HTML page without plots, with a note (and a warning on stderr)
that plots need ``pip install 'posenc-conformance[docs]'``; :meth:`Card.write_plots` itself raises
:class:`MissingExtra`.  The HTML page also needs Sphinx (the same extra): without it, an error.
"""

from __future__ import annotations

from posenc.tools.card.build import (MAX_HEAD_DIM, MAX_HEADS, MAX_LENGTH, MAX_T5, MAX_TABLE_ROWS, build_card,
                                     registry_cards)
from posenc.tools.card.command import OUT_MARKER, main
from posenc.tools.card.model import MATPLOTLIB_MISSING, Component, MissingExtra, Param, PlotSpec
from posenc.tools.card.render import MAX_ROWS, Card, rst_escape
from posenc.tools.card.text import MAX_SLUG, MAX_TEXT

__all__ = ["Card", "Component", "Param", "PlotSpec", "MissingExtra", "MATPLOTLIB_MISSING", "build_card", "registry_cards",
           "rst_escape", "main", "OUT_MARKER", "MAX_HEAD_DIM", "MAX_HEADS", "MAX_LENGTH", "MAX_T5", "MAX_TABLE_ROWS",
           "MAX_ROWS", "MAX_SLUG", "MAX_TEXT"]
