"""The local web view of the journal (``journal-agent view``) and its exports.

``site`` reads what the pages show; ``pages`` renders them (Jinja2); ``server`` serves them
(Starlette + uvicorn) behind ``guard``; ``export`` writes them as files. The web stack is
imported only inside this package, and only when a command needs it.
"""
