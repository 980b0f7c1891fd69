"""CTF bundles: layouts, segments (the CTF tasks), archive and DAS wavefields. Importing the
package registers the `ctf_bundle` recipe output in `OUTPUTS` (`recipe_output`)."""

from seisctf.pipeline.bundles import recipe_output as recipe_output
