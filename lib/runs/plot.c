/* A gnuplot script for the curves of runs: self-contained (the data is
 * inline, in data blocks), so a user can restyle it and run it again. */
#include <string.h>

#include "runs.h"

/* A gnuplot single-quoted string: '' stands for ', and a line break would
 * end the command. */
static int quoted(dlt_buf *b, const char *s)
{
	DLT_TRY_RC(dlt_buf_append(b, "'", 1));
	for (; *s; s++) {
		const char *c = *s == '\'' ? "''" : *s == '\n' || *s == '\r' ? " " : s;
		DLT_TRY_RC(dlt_buf_append(b, c, *s == '\'' ? 2 : 1));
	}
	return dlt_buf_append(b, "'", 1);
}

static double x_of(const dlt_point *p, const char *x)
{
	return strcmp(x, "epoch") == 0 ? p->epoch : strcmp(x, "time") == 0 ? p->time : p->step;
}

static int header(const dlt_plot *p, dlt_buf *b)
{
	int h = p->nmetrics > 1 ? 280 * (int)p->nmetrics : 450;

	DLT_TRY_RC(dlt_buf_printf(b, "# written by dlt-runs plot: edit it, then run gnuplot on it\n"));
	if (strcmp(p->terminal, "svg") == 0)
		DLT_TRY_RC(dlt_buf_printf(b, "set terminal svg size 900,%d dynamic "
					  "background '#ffffff'\n", h));
	else if (strcmp(p->terminal, "png") == 0)
		DLT_TRY_RC(dlt_buf_printf(b, "set terminal pngcairo size 900,%d "
					  "background '#ffffff'\n", h));
	else
		DLT_TRY_RC(dlt_buf_printf(b, "set terminal dumb size %d,%d\n", p->width, p->height));
	if (p->output) {
		DLT_TRY_RC(dlt_buf_printf(b, "set output "));
		DLT_TRY_RC(quoted(b, p->output));
		DLT_TRY_RC(dlt_buf_printf(b, "\n"));
	}
	/* run names hold _ and ^, which enhanced text would typeset; a grid
	 * of dots in text hides the curves */
	return dlt_buf_printf(b, "set termoption noenhanced\n%sset key outside right top\n"
			      "set xlabel '%s'\n", strcmp(p->terminal, "dumb") ? "set grid\n" : "",
			      strcmp(p->x, "time") == 0 ? "time (s)" : p->x);
}

static int data_block(const dlt_plot *p, const dlt_series *s, size_t run, size_t m,
		      dlt_buf *b)
{
	DLT_TRY_RC(dlt_buf_printf(b, "$r%zu_m%zu << EOD\n", run, m));
	for (size_t i = 0; i < s->n; i++)
		DLT_TRY_RC(dlt_buf_printf(b, "%.9g %.9g\n", x_of(&s->p[i], p->x), s->p[i].value));
	return dlt_buf_printf(b, "EOD\n");
}

int dlt_runs_gnuplot(const dlt_plot *p, const dlt_runinfo *runs, size_t n, dlt_buf *out)
{
	DLT_TRY_RC(header(p, out));
	for (size_t m = 0; m < p->nmetrics; m++)
		for (size_t r = 0; r < n; r++) {
			const dlt_series *s = dlt_runs_series(&runs[r], p->metrics[m]);
			if (s && s->n)
				DLT_TRY_RC(data_block(p, s, r, m, out));
		}
	if (p->nmetrics > 1)
		DLT_TRY_RC(dlt_buf_printf(out, "set multiplot layout %zu,1\n", p->nmetrics));
	for (size_t m = 0; m < p->nmetrics; m++) {
		const char *sep = "plot ";

		DLT_TRY_RC(dlt_buf_printf(out, "set title "));
		DLT_TRY_RC(quoted(out, p->metrics[m]));
		DLT_TRY_RC(dlt_buf_printf(out, "\n"));
		for (size_t r = 0; r < n; r++) {
			const dlt_series *s = dlt_runs_series(&runs[r], p->metrics[m]);
			if (!s || !s->n)
				continue;
			/* a run keeps its colour in every panel; few points
			 * (an evaluation an epoch) are marked */
			DLT_TRY_RC(dlt_buf_printf(out, "%s$r%zu_m%zu using 1:2 with %s lc %zu title ",
						  sep, r, m, s->n > 30 ? "lines" : "linespoints",
						  r + 1));
			DLT_TRY_RC(quoted(out, runs[r].dir));
			sep = ", \\\n\t";
		}
		if (strcmp(sep, "plot ") == 0)	/* no run has it: an empty panel */
			DLT_TRY_RC(dlt_buf_printf(out, "set label 1 'no data' at graph 0.5,0.5 center\n"
						  "plot [0:1] [0:1] NaN notitle\nunset label 1"));
		DLT_TRY_RC(dlt_buf_printf(out, "\n"));
	}
	if (p->nmetrics > 1)
		DLT_TRY_RC(dlt_buf_printf(out, "unset multiplot\n"));
	return 0;
}
