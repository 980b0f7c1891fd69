"""CTF bundles: layouts, segments (the CTF tasks), archive and DAS wavefields."""
