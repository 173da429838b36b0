"""The project's file formats: the model set (and its parts), the results file, the
embedded presets. Each translates itself into the kernel's types."""
