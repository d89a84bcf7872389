"""The models a State is made of, one module per part of the node; ``mokkafs.state`` holds
the State itself and names them all. Immutable, and nothing here does I/O."""
