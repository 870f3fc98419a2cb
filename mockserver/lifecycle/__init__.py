"""The Responses API's lifecycle: the status machine and the runs that move through it
(:mod:`mockserver.lifecycle.runs`), kept in the records of :mod:`mockserver.state.records`."""
