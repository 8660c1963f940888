"""Tests for strategic merge patch, server-side apply and field ownership."""
