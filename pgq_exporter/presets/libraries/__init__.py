"""The library presets: ``<name>.py`` declares one (its ``PRESET``), ``<name>.sql``
beside it holds its named SQL blocks. presets.library reads every pair here."""
