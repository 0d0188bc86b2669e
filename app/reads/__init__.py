"""The pages' read side: what several domains' repositories compose for one page."""
