//! What every SVG chart of flashscan shares (the workbench's sweeps and timelines, the
//! benchmarks' panels): one palette, one way to draw a labelled line with its points, one
//! legend style. Each chart only chooses its panels, axes and data.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::ranged1d::AsRangedCoord;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Colours in the order lines take them (matplotlib's "tab10", easy to tell apart).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// The colour of line number `index`.
pub fn color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// A chart's failure as text (plotters' error types are generic over the backend).
pub fn chart_error(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A page of `count` panels stacked top to bottom on white: `draw` fills them, then the page
/// is presented (written out).
pub fn stacked_panels<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    count: usize,
    draw: impl FnOnce(&[DrawingArea<DB, Shift>]) -> Result<(), String>,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(chart_error)?;
    let panels = root.split_evenly((count, 1));
    draw(&panels)?;
    root.present().map_err(chart_error)
}

/// One panel's frame: caption, margins and label areas alike in every chart.
pub fn panel<'a, DB: DrawingBackend, X: AsRangedCoord, Y: AsRangedCoord>(
    area: &'a DrawingArea<DB, Shift>,
    caption: &str,
    x: X,
    y: Y,
) -> Result<ChartContext<'a, DB, Cartesian2d<X::CoordDescType, Y::CoordDescType>>, String> {
    ChartBuilder::on(area).caption(caption, ("sans-serif", 20)).margin(10).x_label_area_size(36).y_label_area_size(70).build_cartesian_2d(x, y).map_err(chart_error)
}

/// A labelled line through `points` in the colour of `index`, with a dot at each point
/// when `dots` (measured points; a dense series draws the line alone).
pub fn line<'a, DB: DrawingBackend + 'a, X: Ranged<ValueType = XV>, XV: Clone + 'static>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, RangedCoordf64>>,
    points: Vec<(XV, f64)>,
    index: usize,
    label: &str,
    dots: bool,
) -> Result<(), String> {
    let c = color(index);
    chart
        .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))
        .map_err(chart_error)?
        .label(label.to_string())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    if dots {
        chart.draw_series(points.into_iter().map(|p| Circle::new(p, 3, c.filled()))).map_err(chart_error)?;
    }
    Ok(())
}

/// The legend box, in one style everywhere.
pub fn legend<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>, position: SeriesLabelPosition) -> Result<(), String> {
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).position(position).draw().map_err(chart_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panel_with_a_line_and_a_legend_renders() {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (400, 300)).into_drawing_area();
            stacked_panels(root, 2, |panels| {
                assert_eq!(panels.len(), 2);
                for (i, area) in panels.iter().enumerate() {
                    let mut chart = panel(area, &format!("test {i}"), 0.0..10.0, 0.0..10.0)?;
                    chart.configure_mesh().draw().map_err(chart_error)?;
                    line(&mut chart, vec![(1.0, 1.0), (5.0, 8.0)], i, &format!("line {i}"), true)?;
                    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
                }
                Ok(())
            })
            .unwrap();
        }
        assert!(svg.contains("<svg") && svg.contains("line 0") && svg.contains("line 1"), "{svg}");
        assert_eq!(color(8), PALETTE[0]);
    }
}
