"""CTF bundles: segments (the CTF tasks), archive and DAS wavefields; `recipe_output` registers
the `ctf_bundle` recipe output in `OUTPUTS` (found through its entry point)."""
