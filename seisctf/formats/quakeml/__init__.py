"""QuakeML catalogues and the event windows cut from an archive with them."""
