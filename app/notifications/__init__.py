"""Telling people what happened: notifications written in the same transaction as the
change they describe, read in the portal's bell."""
