"""The web server (``textflix serve``): the pages, the JSON API, the queries and HTML they
show, the live analysis of new reviews, and the guard, limits and headers around them.
Imports nothing of ``app.offline``."""
