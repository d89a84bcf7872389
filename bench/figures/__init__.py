"""One module per figure (or small group of figures) of the run, each a function of its sizes
and a temporary directory that returns the figure's rows."""
