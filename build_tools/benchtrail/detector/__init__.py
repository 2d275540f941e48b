"""The detector evaluation: how often the rules alert, measured."""
