"""MkDocs hook: write ``robots.txt`` for the site at ``site_url``.

It allows every crawler and names the sitemap MkDocs writes, so both carry the published address
when ``SITE_URL`` is set (mkdocs.yml) and the local one otherwise. MkDocs normalises ``site_url``
to end in ``/``. Crawlers read robots.txt only at a host's root: on a project site
(``https://<owner>.github.io/<repo>/``) the file is harmless but unread; on a user site or a
custom domain it is the one they read.
"""

from pathlib import Path


def on_post_build(config):
    robots = f"User-agent: *\nAllow: /\nSitemap: {config.site_url}sitemap.xml\n"
    Path(config.site_dir, "robots.txt").write_text(robots, encoding="utf-8")
