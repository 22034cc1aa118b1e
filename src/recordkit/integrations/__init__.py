"""recordkit inside other frameworks: PyTorch (:mod:`.torch`), Ray Data (:mod:`.ray`) and Dask (:mod:`.dask`).

Each module imports its framework on import; importing this package imports none of them."""
