package deps
