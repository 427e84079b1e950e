"""Files: whole-file outputs (`outputs.py`), writes to a descriptor (`fdio.py`), YAML read with line numbers (`yamlnodes.py`)."""
