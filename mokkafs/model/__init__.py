"""The domain: the models a State is made of, one module per part of the node
(``mokkafs.state`` holds the State itself and names them all), and the arithmetic on them
that more than the compile needs: PCI addresses (``bdf``), SR-IOV functions (``sriov``),
InfiniBand GUIDs and LIDs (``identity``), the MIG tables (``mig_tables``). Immutable, and
nothing here does I/O or reads a profile."""
