"""The recipe build engine: validating a recipe, running its source, transforms and outputs."""
