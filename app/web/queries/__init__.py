"""The queries behind the pages, a module per page (dashboard, reviews, about) over the rows and
the model summaries they share.

Every function returns plain dicts and lists (JSON-ready), which both the HTML templates
and the JSON twin of each page use, so the two always show the same thing. Pages show
only the catalogue (``Review.split == "catalogue"``, user-posted reviews included); what
the view hides (sentiment with Analyze off, gold labels with accuracy off) is left out.
A page costs a handful of queries, whatever the number of reviews.
"""
