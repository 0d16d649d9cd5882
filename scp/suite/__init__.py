"""The notebook suite's plumbing: the papermill runner, what a notebook records (values, provenance), one figure
style, and the gallery.
"""
