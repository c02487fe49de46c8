"""What a run leaves behind: the ConformanceReport, JUnit, Allure and the HTML page.

`report` counts a run as GIE publishes it (pure functions); `reporting` is the
pytest side that writes everything at the end of a run; `artifacts` and
`evidence` are the Allure facts, categories and attachments; `html_report` the
offline page; `inventory` the profile's whole test list; `publication` checks
a `reports/` tree before it is published.
"""
