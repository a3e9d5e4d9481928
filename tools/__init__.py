"""The tools around the suite: the conformance and model matrices (:mod:`.matrix`, :mod:`.model_matrix`,
:mod:`.runs`), the spec site (:mod:`.docs_site`), cite-check (:mod:`.cite_check`), the positional-encoding
card (:mod:`.card`) and the coverage of parameters and branches (:mod:`.coverage`).

They use the suite only through its public outputs -- running ``pytest`` on it, reading its
``--report-json`` -- and never import it (a contract in .importlinter).
"""
