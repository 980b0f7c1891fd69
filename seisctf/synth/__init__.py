"""Synthetic sources: the global, DAS and crustal generators, registered in `SYNTHS` by
`sources` (found through its entry points), and what each would write (`output_sizes`)."""
